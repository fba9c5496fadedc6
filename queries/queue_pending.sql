-- Pending pods and pending GPU demand per hour of the window, by namespace and priority class,
-- as integer pod-microseconds and GPU-microseconds (divided by 3.6e9 they are the hour's
-- average number of pending pods and of GPUs asked for).
-- Reads `pending_buckets`: pending_samples of the window summed per cluster, namespace,
-- priority class, GPU resource and 15-minute bucket (pod_us = SUM(step_s x 1e6), gpu_us =
-- SUM(gpu_request x step_s x 1e6), a HAMi pod's vGPUs each its gpu_share_pct of a GPU), from
-- the lake's rollups or the window's rows
-- (src/lake/day_sums.rs); the per-row form is benches/sql/queue_pending.sql. Four buckets make
-- an hour: the hour is integer arithmetic on the bucket's epoch milliseconds.
SELECT
  arrow_cast(CAST(q.bucket AS BIGINT) / 3600000 * 3600000, 'Timestamp(Millisecond, Some("UTC"))') AS hour,
  CAST(q.namespace AS VARCHAR)                                                  AS namespace,
  COALESCE(CAST(q.priority_class AS VARCHAR), '')                               AS priority_class,
  SUM(q.pod_us)                                                                 AS pod_us,
  SUM(q.gpu_us)                                                                 AS gpu_us
FROM pending_buckets q
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
