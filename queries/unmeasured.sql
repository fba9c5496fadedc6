-- GPU time of the pool that no DCGM sample covered over [$1, $2), even within Prometheus'
-- lookback (an exporter down, missed scrapes, a node without an exporter), per node: the
-- lake's rows of `__unmeasured__`, in integer GPU-microseconds, first and last step.
--   $1, $2  window start and end (TIMESTAMP, UTC); $3, $4 first and last `date` partition
SELECT
  s.node_name                                                           AS node,
  SUM(s.gpu_us)                                                  AS gpu_us,
  MIN(s.ts)                                                      AS first_ts,
  MAX(s.ts)                                                      AS last_ts
FROM gpu_time s
WHERE s.date >= $3 AND s.date <= $4
  AND s.ts >= $1 AND s.ts < $2
  AND s.namespace = '__unmeasured__'
GROUP BY 1
ORDER BY 2 DESC, 1
