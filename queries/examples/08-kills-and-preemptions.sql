-- Which namespaces lose work to OOM kills, crashes, preemptions and evictions?
-- gpuledger query -f queries/examples/08-kills-and-preemptions.sql --param month=2026-10
SELECT
  namespace,
  priority_class,
  COUNT(*)                                                              AS pods,
  SUM(CASE WHEN termination_reason = 'OOMKilled' THEN 1 ELSE 0 END)     AS oom_killed,
  SUM(CASE WHEN termination_reason = 'Error' THEN 1 ELSE 0 END)         AS crashed,
  SUM(CASE WHEN termination_reason = 'Preempted' THEN 1 ELSE 0 END)     AS preempted,
  SUM(CASE WHEN termination_reason = 'Evicted' THEN 1 ELSE 0 END)       AS evicted
FROM pod_runs
WHERE month = $month
GROUP BY namespace, priority_class
ORDER BY namespace, priority_class
