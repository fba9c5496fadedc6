-- GPU time per node and GPU model over [$1, $2): all, allocated to a pod, utilisation-weighted
-- and with a utilisation value, as integer GPU-microseconds, and energy (mJ). Read from the
-- window's 15-minute sums (`gpu_bucket_time`: the lake's rollups, or a pass over the day's
-- samples; src/report/gpu_buckets.rs) one week piece at a time; the report adds the pieces.
--   $1, $2  window start and end; $3, $4 its first and last `date` (the sums are cut to them)
SELECT
  CASE WHEN x.cluster IS NULL OR CAST(x.cluster AS VARCHAR) = 'default' THEN CAST(x.node AS VARCHAR)
       ELSE concat(CAST(x.cluster AS VARCHAR), '/', CAST(x.node AS VARCHAR)) END                 AS node,
  CAST(x.gpu_model AS VARCHAR)                                                                   AS gpu_model,
  SUM(x.gpu_us)                                                                                  AS gpu_us,
  SUM(CASE WHEN x.allocated THEN x.gpu_us ELSE 0 END)                                            AS allocated_gpu_us,
  SUM(x.util_gpu_us)                                                                             AS util_gpu_us,
  SUM(x.util_known_gpu_us)                                                                       AS util_known_gpu_us,
  SUM(CASE WHEN x.allocated THEN x.util_gpu_us ELSE 0 END)                                       AS allocated_util_gpu_us,
  SUM(CASE WHEN x.allocated THEN x.util_known_gpu_us ELSE 0 END)                                 AS allocated_util_known_gpu_us,
  SUM(x.energy_mj)                                                                               AS energy_mj
FROM (
  SELECT b.*, COALESCE(b.namespace IS NOT NULL AND CAST(b.namespace AS VARCHAR) <> '__unmeasured__', false) AS allocated
  FROM gpu_bucket_time b
) x
GROUP BY 1, 2
ORDER BY 1, 2
