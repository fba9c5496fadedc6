-- The chargeback's step 1 per pod, for its rows by a per-pod key (`--by workload`, `queue`,
-- `label:KEY`, ...: src/report/chargeback/attribution.rs): gpu_samples in [$1, $2) summed per
-- cluster, namespace and pod, node, GPU model, MIG profile, 15-minute bucket, share and step,
-- the namespace column carrying `<namespace>` U+001F `<pod>`. These rows are priced by
-- `chargeback_grain.sql` exactly as the namespace's (`gpu_buckets`: the same sums, one level
-- finer), so a namespace's pods' priced rows add up to its own to the unit.
--   $1, $2  window (TIMESTAMP, UTC); $3, $4 first and last `date` partition
SELECT
  COALESCE(CAST(s.cluster AS VARCHAR), 'default')                         AS cluster,
  CASE WHEN s.namespace IS NULL THEN NULL
       ELSE concat(CAST(s.namespace AS VARCHAR), chr(31), COALESCE(CAST(s.pod AS VARCHAR), '')) END AS namespace,
  CAST(s.node AS VARCHAR)                                                 AS node,
  CAST(s.gpu_model AS VARCHAR)                                            AS gpu_model,
  CAST(s.mig_profile AS VARCHAR)                                          AS mig_profile,
  date_bin(INTERVAL '15 minutes', s.ts)                                   AS bucket,
  CAST(s.ts AS DATE)                                                      AS day,
  s.share                                                                 AS share,
  s.step_s                                                                AS step_s,
  COUNT(*)                                                                AS n,
  SUM(CAST(ROUND(COALESCE(s.energy_j, 0) * 1000) AS BIGINT))              AS energy_mj,
  SUM(CAST(ROUND(COALESCE(s.util_pct, 0) * s.share * s.step_s * 1000000) AS BIGINT)) AS util_gpu_us,
  COUNT(s.util_pct)                                                       AS util_n
FROM gpu_samples s
WHERE s.date >= $3 AND s.date <= $4
  AND s.ts >= $1 AND s.ts < $2
  AND s.namespace IS NOT NULL
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
