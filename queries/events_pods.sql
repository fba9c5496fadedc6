-- Pods that ended badly in the window [$1, $2), as queries/events.sql counts them, per cluster,
-- namespace, pod name and priority class: the events by a key of each pod (`--by workload`,
-- `queue`, ...; src/report/events.rs adds each pod's counts to its value's). Summed over the pods
-- they are events.sql's rows.
--   $4      last `date` partition of the window (pods are partitioned by their creation day)
SELECT
  COALESCE(CAST(p.cluster AS VARCHAR), 'default')                                   AS cluster,
  CAST(p.namespace AS VARCHAR)                                                      AS namespace,
  p.pod                                                                             AS pod,
  COALESCE(CAST(p.priority_class AS VARCHAR), '')                                   AS priority_class,
  COUNT(*)                                                                          AS pods_finished,
  SUM(CASE WHEN CAST(p.termination_reason AS VARCHAR) = 'OOMKilled' THEN 1 ELSE 0 END) AS oom_killed,
  SUM(CASE WHEN CAST(p.termination_reason AS VARCHAR) = 'Error' THEN 1 ELSE 0 END)     AS crashed,
  SUM(CASE WHEN CAST(p.termination_reason AS VARCHAR) = 'Preempted' THEN 1 ELSE 0 END) AS preempted,
  SUM(CASE WHEN CAST(p.termination_reason AS VARCHAR) = 'Evicted' THEN 1 ELSE 0 END)   AS evicted,
  SUM(CASE WHEN CAST(p.termination_reason AS VARCHAR) IN ('OOMKilled', 'Error', 'Preempted', 'Evicted')
           THEN CAST(p.gpu_request AS BIGINT) * (CAST(p.finished AS BIGINT) - CAST(COALESCE(p.started, p.finished) AS BIGINT)) * 1000
           ELSE 0 END)                                                              AS lost_gpu_us
FROM pods p
WHERE p.date <= $4
  AND p.finished >= $1 AND p.finished < $2
GROUP BY 1, 2, 3, 4
ORDER BY 1, 2, 3, 4
