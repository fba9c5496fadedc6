-- GPU time by weekday and hour of day (UTC) over [$1, $2): all, allocated to a pod, and
-- utilisation-weighted, as integer GPU-microseconds, and the GPU time that had a utilisation
-- value (averages leave out rows whose utilisation was missing, NaN or Inf). dow: 0 = Sunday.
--   $1, $2  window start and end (TIMESTAMP, UTC); $3, $4 first and last `date` partition
SELECT
  CAST(date_part('dow', s.ts) AS BIGINT)                                                         AS dow,
  CAST(date_part('hour', s.ts) AS BIGINT)                                                        AS hour,
  SUM(CAST(ROUND(s.share * s.step_s * 1000000) AS BIGINT))                                       AS gpu_us,
  SUM(CASE WHEN s.namespace IS NOT NULL AND s.namespace <> '__unmeasured__' THEN CAST(ROUND(s.share * s.step_s * 1000000) AS BIGINT) ELSE 0 END) AS allocated_gpu_us,
  SUM(CAST(ROUND(COALESCE(s.util_pct, 0) * s.share * s.step_s * 1000000) AS BIGINT))             AS util_gpu_us,
  SUM(CASE WHEN s.util_pct IS NOT NULL THEN CAST(ROUND(s.share * s.step_s * 1000000) AS BIGINT) ELSE 0 END) AS util_known_gpu_us,
  SUM(CASE WHEN s.namespace IS NOT NULL AND s.namespace <> '__unmeasured__' THEN CAST(ROUND(COALESCE(s.util_pct, 0) * s.share * s.step_s * 1000000) AS BIGINT) ELSE 0 END) AS allocated_util_gpu_us,
  SUM(CASE WHEN s.namespace IS NOT NULL AND s.namespace <> '__unmeasured__' AND s.util_pct IS NOT NULL THEN CAST(ROUND(s.share * s.step_s * 1000000) AS BIGINT) ELSE 0 END) AS allocated_util_known_gpu_us
FROM gpu_samples s
WHERE s.date >= $3 AND s.date <= $4
  AND s.ts >= $1 AND s.ts < $2
GROUP BY 1, 2
ORDER BY 1, 2
