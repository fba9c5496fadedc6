-- The per-row form of queries/queue_pending.sql, over every pending_samples row (the tests'
-- oracle, and DuckDB's side of the benchmark); gpuledger sums the same per bucket first.
-- Pending pods and pending GPU demand per hour of [$1, $2), by namespace and priority class,
-- as integer pod-microseconds and GPU-microseconds (divided by 3.6e9 they are the hour's
-- average number of pending pods and of GPUs asked for).
--   $3, $4  first and last `date` partition
-- The hour is integer arithmetic on the epoch milliseconds, cast back to the column's type:
-- the same value as date_trunc('hour', ts) on a UTC timestamp, twenty times faster here.
SELECT
  arrow_cast(CAST(q.ts AS BIGINT) / 3600000 * 3600000, 'Timestamp(Millisecond, Some("UTC"))') AS hour,
  CAST(q.namespace AS VARCHAR)                                                  AS namespace,
  COALESCE(CAST(q.priority_class AS VARCHAR), '')                               AS priority_class,
  SUM(CAST(q.step_s AS BIGINT) * 1000000)                                       AS pod_us,
  -- A HAMi pod's vGPUs are each its gpu_share_pct of a GPU (rounded per row to the us).
  SUM(CAST(round(CAST(q.gpu_request AS DOUBLE) * CAST(q.step_s AS DOUBLE) * 1000000 * COALESCE(q.gpu_share_pct, 100) / 100) AS BIGINT)) AS gpu_us
FROM pending_samples q
WHERE q.date >= $3 AND q.date <= $4
  AND q.ts >= $1 AND q.ts < $2
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
