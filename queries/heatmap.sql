-- GPU time by weekday and hour of day (UTC) over [$1, $2): all, allocated to a pod, and
-- utilisation-weighted, as integer GPU-microseconds, and the GPU time that had a utilisation
-- value (averages leave out rows whose utilisation was missing, NaN or Inf), per row from the
-- `gpu_time` view. dow: 0 = Sunday.
--   $1, $2  window start and end (TIMESTAMP, UTC); $3, $4 first and last `date` partition
SELECT
  CAST(date_part('dow', s.ts) AS BIGINT)                                                         AS dow,
  CAST(date_part('hour', s.ts) AS BIGINT)                                                        AS hour,
  SUM(s.gpu_us)                                                                                  AS gpu_us,
  SUM(s.allocated_gpu_us)                                                                        AS allocated_gpu_us,
  SUM(s.util_gpu_us)                                                                             AS util_gpu_us,
  SUM(s.util_known_gpu_us)                                                                       AS util_known_gpu_us,
  SUM(CASE WHEN s.allocated THEN s.util_gpu_us ELSE 0 END)                                       AS allocated_util_gpu_us,
  SUM(CASE WHEN s.allocated THEN s.util_known_gpu_us ELSE 0 END)                                 AS allocated_util_known_gpu_us
FROM gpu_time s
WHERE s.date >= $3 AND s.date <= $4
  AND s.ts >= $1 AND s.ts < $2
GROUP BY 1, 2
ORDER BY 1, 2
