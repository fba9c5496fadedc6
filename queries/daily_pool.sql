-- The pool per day of [$1, $2): GPU time in all, allocated to a pod, and utilisation-weighted,
-- as integer GPU-microseconds (the HTML page's time series), and the GPU time with a
-- utilisation value (the average's denominator). GPU time no sample covered
-- (`__unmeasured__`) is in the pool but not allocated.
--   $1, $2  window (TIMESTAMP, UTC); $3, $4 first and last `date` partition
SELECT
  s.date                                                                                         AS date,
  SUM(CAST(ROUND(s.share * s.step_s * 1000000) AS BIGINT))                                       AS gpu_us,
  SUM(CASE WHEN s.namespace IS NOT NULL AND s.namespace <> '__unmeasured__' THEN CAST(ROUND(s.share * s.step_s * 1000000) AS BIGINT) ELSE 0 END) AS allocated_gpu_us,
  SUM(CAST(ROUND(COALESCE(s.util_pct, 0) * s.share * s.step_s * 1000000) AS BIGINT))             AS util_gpu_us,
  SUM(CASE WHEN s.util_pct IS NOT NULL THEN CAST(ROUND(s.share * s.step_s * 1000000) AS BIGINT) ELSE 0 END) AS util_known_gpu_us
FROM gpu_samples s
WHERE s.date >= $3 AND s.date <= $4
  AND s.ts >= $1 AND s.ts < $2
GROUP BY 1
ORDER BY 1
