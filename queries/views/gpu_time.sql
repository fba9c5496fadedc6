-- Every GPU row of the lake (gpu_samples) with its GPU time in integer GPU-microseconds.
-- The one definition of GPU time that the reports over samples read (daily pool, heatmap,
-- idle, unmeasured, the `usage` view); the chargeback reads the same quantities of its
-- 15-minute sums from `queries/views/gpu_bucket_time.sql`.
--   *: every column of `gpu_samples`, as documented there, and:
--   node_name: the node as reports name it: `cluster/node`, or the node alone in the default cluster
--   allocated: a pod held the GPU (false: no pod, or `__unmeasured__` pool time no sample covered)
--   gpu_us: the row's GPU time, ROUND(share x step_s x 1e6)
--   util_gpu_us: utilisation-weighted GPU time, ROUND(util_pct x share x step_s x 1e6), 0 where util_pct is NULL
--   allocated_gpu_us: gpu_us when allocated, else 0
--   util_known_gpu_us: gpu_us when the row has a utilisation value, else 0 (an average's denominator)
SELECT
  t.*,
  CASE WHEN t.allocated THEN t.gpu_us ELSE 0 END                                                     AS allocated_gpu_us,
  CASE WHEN t.util_pct IS NOT NULL THEN t.gpu_us ELSE 0 END                                          AS util_known_gpu_us
FROM (
  SELECT
    s.*,
    CASE WHEN s.cluster IS NULL OR CAST(s.cluster AS VARCHAR) = 'default' THEN CAST(s.node AS VARCHAR)
         ELSE concat(CAST(s.cluster AS VARCHAR), '/', CAST(s.node AS VARCHAR)) END                    AS node_name,
    COALESCE(s.namespace IS NOT NULL AND s.namespace <> '__unmeasured__', false)                     AS allocated,
    CAST(ROUND(s.share * s.step_s * 1000000) AS BIGINT)                                              AS gpu_us,
    CAST(ROUND(COALESCE(s.util_pct, 0) * s.share * s.step_s * 1000000) AS BIGINT)                    AS util_gpu_us
  FROM gpu_samples s
) t
