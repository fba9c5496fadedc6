-- GPU time by weekday and hour of day (UTC) over [$1, $2): all, allocated to a pod, and
-- utilisation-weighted, as integer GPU-microseconds, and the GPU time that had a utilisation
-- value (averages leave out rows whose utilisation was missing, NaN or Inf). dow: 0 = Sunday.
-- Read from the window's 15-minute sums (`gpu_bucket_time`: the lake's rollups, or a pass over
-- the day's samples; src/report/gpu_buckets.rs), already cut to the window row by row: a bucket
-- lies within one hour, and its sums are the per-row values' sums (the same numbers as this
-- query over every row of `gpu_time`). Weekday and hour by integer arithmetic on the bucket's
-- epoch milliseconds (1970-01-01 was a Thursday, dow 4).
--   $1, $2  window start and end; $3, $4 its first and last `date` (the sums are cut to them)
SELECT
  (CAST(x.bucket AS BIGINT) / 86400000 + 4) % 7                                                  AS dow,
  CAST(x.bucket AS BIGINT) / 3600000 % 24                                                        AS hour,
  SUM(x.gpu_us)                                                                                  AS gpu_us,
  SUM(CASE WHEN x.allocated THEN x.gpu_us ELSE 0 END)                                            AS allocated_gpu_us,
  SUM(x.util_gpu_us)                                                                             AS util_gpu_us,
  SUM(x.util_known_gpu_us)                                                                       AS util_known_gpu_us,
  SUM(CASE WHEN x.allocated THEN x.util_gpu_us ELSE 0 END)                                       AS allocated_util_gpu_us,
  SUM(CASE WHEN x.allocated THEN x.util_known_gpu_us ELSE 0 END)                                 AS allocated_util_known_gpu_us
FROM (
  SELECT b.*, COALESCE(b.namespace IS NOT NULL AND CAST(b.namespace AS VARCHAR) <> '__unmeasured__', false) AS allocated
  FROM gpu_bucket_time b
) x
GROUP BY 1, 2
ORDER BY 1, 2
