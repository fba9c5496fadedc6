-- Pods that ended badly in the window [$1, $2), by namespace and priority class: OOM kills,
-- crashes (Error), preemptions and evictions, and the GPU time those pods had run (work lost).
--   $1, $2  window start and end (TIMESTAMP, UTC), half-open; events count when the pod finished
--   $4      last `date` partition of the window (pods are partitioned by their creation day)
SELECT
  CAST(p.namespace AS VARCHAR)                                                      AS namespace,
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
GROUP BY 1, 2
ORDER BY 1, 2
