-- Kueue pending workloads per ClusterQueue and status over [$1, $2), where Kueue runs.
--   $3, $4  first and last `date` partition
SELECT
  CAST(k.cluster_queue AS VARCHAR)     AS cluster_queue,
  CAST(k.status AS VARCHAR)            AS status,
  COUNT(*)                             AS samples,
  CAST(ROUND(AVG(k.workloads) * 100) AS BIGINT) AS avg_workloads_centi,
  CAST(MAX(k.workloads) AS BIGINT)     AS max_workloads
FROM kueue_pending k
WHERE k.date >= $3 AND k.date <= $4
  AND k.ts >= $1 AND k.ts < $2
GROUP BY 1, 2
ORDER BY 1, 2
