-- How long do pods wait for GPUs (created to scheduled), by namespace and priority class?
-- gpuledger query -f queries/examples/07-wait-percentiles.sql --param month=2026-10
SELECT
  namespace,
  priority_class,
  COUNT(wait_s)                                              AS scheduled_pods,
  ROUND(median(wait_s) / 60.0, 2)                            AS p50_wait_min,
  ROUND(approx_percentile_cont(wait_s, 0.95) / 60.0, 2)      AS p95_wait_min,
  ROUND(MAX(wait_s) / 60.0, 2)                               AS max_wait_min
FROM pod_runs
WHERE month = $month
GROUP BY namespace, priority_class
ORDER BY namespace, priority_class
