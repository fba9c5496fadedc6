-- The pool per day of [$1, $2): GPU time in all, allocated to a pod, and utilisation-weighted,
-- as integer GPU-microseconds (the HTML page's time series), and the GPU time with a
-- utilisation value (the average's denominator). GPU time no sample covered (`__unmeasured__`)
-- is in the pool but not allocated. Read from the window's 15-minute sums (`gpu_bucket_time`,
-- as `heatmap.sql`), already cut to the window; `day` is the UTC day of the bucket, the day file
-- its rows came from.
--   $1, $2  window (TIMESTAMP, UTC); $3, $4 first and last `date` (the sums are cut to them)
SELECT
  CAST(x.day AS VARCHAR)    AS date,
  SUM(x.gpu_us)             AS gpu_us,
  SUM(CASE WHEN x.allocated THEN x.gpu_us ELSE 0 END) AS allocated_gpu_us,
  SUM(x.util_gpu_us)        AS util_gpu_us,
  SUM(x.util_known_gpu_us)  AS util_known_gpu_us
FROM (
  SELECT b.*, COALESCE(b.namespace IS NOT NULL AND CAST(b.namespace AS VARCHAR) <> '__unmeasured__', false) AS allocated
  FROM gpu_bucket_time b
) x
GROUP BY 1
ORDER BY 1
