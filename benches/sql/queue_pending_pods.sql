-- The per-row form of queries/queue_pending_pods.sql, over every pending_samples row (the tests'
-- oracle): pending pods and pending GPU demand per hour of [$1, $2), by cluster, namespace, pod
-- and priority class, as integer pod-microseconds and GPU-microseconds.
--   $3, $4  first and last `date` partition
SELECT
  arrow_cast(CAST(q.ts AS BIGINT) / 3600000 * 3600000, 'Timestamp(Millisecond, Some("UTC"))') AS hour,
  COALESCE(CAST(q.cluster AS VARCHAR), 'default')                               AS cluster,
  CAST(q.namespace AS VARCHAR)                                                  AS namespace,
  CAST(q.pod AS VARCHAR)                                                        AS pod,
  COALESCE(CAST(q.priority_class AS VARCHAR), '')                               AS priority_class,
  SUM(CAST(q.step_s AS BIGINT) * 1000000)                                       AS pod_us,
  SUM(CAST(round(CAST(q.gpu_request AS DOUBLE) * CAST(q.step_s AS DOUBLE) * 1000000 * COALESCE(q.gpu_share_pct, 100) / 100) AS BIGINT)) AS gpu_us
FROM pending_samples q
WHERE q.date >= $3 AND q.date <= $4
  AND q.ts >= $1 AND q.ts < $2
GROUP BY 1, 2, 3, 4, 5
ORDER BY 2, 3, 4, 1, 5
