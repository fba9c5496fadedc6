-- The pool a plan replays on: one row per GPU, MIG instance or time-slicing replica group seen
-- in [$1, $2), with the span it was seen over. Time-slicing replicas are several inventory
-- rows of one GPU a day (no MIG profile): `replicas` counts them.
--   $3, $4  first and last `date` partition; $5 the cluster ('' for a lake of one)
SELECT
  COALESCE(CAST(n.cluster AS VARCHAR), 'default') AS cluster,
  CAST(n.node AS VARCHAR)                         AS node,
  CAST(n.gpu_uuid AS VARCHAR)                     AS gpu_uuid,
  CAST(n.gpu_model AS VARCHAR)                    AS gpu_model,
  CAST(n.mig_profile AS VARCHAR)                  AS mig_profile,
  CAST(n.gpu_instance_id AS BIGINT)               AS gpu_instance_id,
  MAX(n.share)                                    AS share,
  CAST(COUNT(*) / COUNT(DISTINCT n.date) AS BIGINT) AS replicas,
  CAST(MIN(n.first_seen) AS BIGINT)               AS first_ms,
  CAST(MAX(n.last_seen) AS BIGINT)                AS last_ms
FROM nodes n
WHERE n.date >= $3 AND n.date <= $4
  AND n.last_seen >= $1 AND n.first_seen < $2
  AND ($5 = '' OR COALESCE(CAST(n.cluster AS VARCHAR), 'default') = $5)
GROUP BY 1, 2, 3, 4, 5, 6
ORDER BY 1, 2, 3, 4, 5, 6
