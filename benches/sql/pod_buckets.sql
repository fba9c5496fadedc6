-- The `pod_buckets` rollup in plain SQL: gpu_samples in [$1, $2) summed per cluster, namespace,
-- pod, node, GPU model, MIG profile, 15-minute bucket (and its UTC day), share and step:
-- `gpu_buckets.sql` one level finer. gpuledger keeps this table per day as a rollup
-- (src/lake/rollup/pod_buckets.rs) for the chargeback by a key of each pod; the tests check the
-- rollup and the pass over days without one against this SQL row for row.
--   $1, $2  window (TIMESTAMP, UTC); $3, $4 first and last `date` partition
SELECT
  COALESCE(CAST(s.cluster AS VARCHAR), 'default')                         AS cluster,
  s.namespace                                                             AS namespace,
  s.pod                                                                   AS pod,
  s.node                                                                  AS node,
  s.gpu_model                                                             AS gpu_model,
  s.mig_profile                                                           AS mig_profile,
  date_bin(INTERVAL '15 minutes', s.ts)                                   AS bucket,
  CAST(s.ts AS DATE)                                                      AS day,
  s.share                                                                 AS share,
  s.step_s                                                                AS step_s,
  COUNT(*)                                                                AS n,
  SUM(CAST(ROUND(COALESCE(s.energy_j, 0) * 1000) AS BIGINT))              AS energy_mj,
  SUM(CAST(ROUND(COALESCE(s.util_pct, 0) * s.share * s.step_s * 1000000) AS BIGINT)) AS util_gpu_us,
  COUNT(s.util_pct) AS util_n
FROM gpu_samples s
WHERE s.date >= $3 AND s.date <= $4
  AND s.ts >= $1 AND s.ts < $2
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
