-- The pool per day of [$1, $2): GPU time in all, allocated to a pod, and utilisation-weighted,
-- as integer GPU-microseconds (the HTML page's time series), and the GPU time with a
-- utilisation value (the average's denominator); per row from the `gpu_time` view. GPU time no
-- sample covered (`__unmeasured__`) is in the pool but not allocated.
--   $1, $2  window (TIMESTAMP, UTC); $3, $4 first and last `date` partition
SELECT
  s.date                    AS date,
  SUM(s.gpu_us)             AS gpu_us,
  SUM(s.allocated_gpu_us)   AS allocated_gpu_us,
  SUM(s.util_gpu_us)        AS util_gpu_us,
  SUM(s.util_known_gpu_us)  AS util_known_gpu_us
FROM gpu_time s
WHERE s.date >= $3 AND s.date <= $4
  AND s.ts >= $1 AND s.ts < $2
GROUP BY 1
ORDER BY 1
