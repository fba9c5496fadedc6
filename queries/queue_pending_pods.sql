-- Pending pods and pending GPU demand per hour of the window, by cluster, namespace, pod and
-- priority class (the queue's pending demand by a key of each pod: src/report/queue.rs joins each
-- pod's value to these rows), as integer pod-microseconds and GPU-microseconds; summed over the
-- pods they are queries/queue_pending.sql's rows.
-- Reads `pending_pod_buckets`: pending_samples of the window summed per cluster, namespace, pod,
-- priority class, GPU resource and 15-minute bucket, from the lake's rollups or the window's rows
-- (src/lake/rollup/pending_pod_buckets.rs); the per-row form is benches/sql/queue_pending_pods.sql.
SELECT
  arrow_cast(CAST(q.bucket AS BIGINT) / 3600000 * 3600000, 'Timestamp(Millisecond, Some("UTC"))') AS hour,
  CAST(q.cluster AS VARCHAR)                                                    AS cluster,
  CAST(q.namespace AS VARCHAR)                                                  AS namespace,
  CAST(q.pod AS VARCHAR)                                                        AS pod,
  COALESCE(CAST(q.priority_class AS VARCHAR), '')                               AS priority_class,
  SUM(q.pod_us)                                                                 AS pod_us,
  SUM(q.gpu_us)                                                                 AS gpu_us
FROM pending_pod_buckets q
GROUP BY 1, 2, 3, 4, 5
ORDER BY 2, 3, 4, 1, 5
