-- Who waited longest for GPUs (time from creation to scheduling)?
-- gpuledger query -f queries/examples/05-longest-waits.sql --param month=2026-10
SELECT
  namespace,
  pod,
  priority_class,
  gpu_request,
  created,
  scheduled,
  ROUND(wait_s / 3600.0, 2)  AS wait_hours
FROM pod_runs
WHERE month = $month AND wait_s IS NOT NULL
ORDER BY wait_s DESC, namespace, pod
LIMIT 10
