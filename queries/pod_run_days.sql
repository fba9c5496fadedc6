-- Every pod's running interval in the window [$1, $2), cut at UTC day boundaries: one row per
-- pod and day it ran, with its requests (and its name, last). Run once per chargeback and handed to
-- `queries/chargeback.sql` as the table `pod_run_days` (it is read there three times: the
-- request-based GPU fallback, CPU and memory).
-- `gpu_request` counts the pod's GPU resource: whole GPUs (`nvidia.com/gpu`) or MIG instances
-- (`nvidia.com/mig-<n>g.<mem>`, n of the GPU's 7 compute slices, 4 on an A30).
--   $1, $2  window start and end (TIMESTAMP, UTC), half-open; $4 the last `date` partition
-- Pods are partitioned by creation day: every partition up to the window's last is read.
-- A pod of a file from before the `cluster` column is in cluster `default`.
WITH runs AS (
  SELECT
    COALESCE(CAST(p.cluster AS VARCHAR), 'default')                 AS cluster,
    CAST(p.namespace AS VARCHAR)                                    AS namespace,
    p.pod                                                           AS pod,
    CAST(p.node AS VARCHAR)                                         AS node,
    CAST(p.gpu_resource AS VARCHAR)                                 AS gpu_resource,
    p.gpu_request,
    p.cpu_request,
    p.mem_request_bytes,
    p.gpu_share_pct,
    greatest(COALESCE(p.started, p.scheduled), $1)                  AS run_from,
    least(COALESCE(p.finished, $2), $2)                             AS run_to
  FROM pods p
  WHERE p.date <= $4
    AND p.node IS NOT NULL
    AND COALESCE(p.started, p.scheduled) IS NOT NULL
    AND COALESCE(p.started, p.scheduled) < $2
    AND COALESCE(p.finished, $2) > $1
)
SELECT
  r.cluster, r.namespace, r.node, r.gpu_resource, r.gpu_request, r.cpu_request, r.mem_request_bytes, r.gpu_share_pct, d.date,
  greatest(r.run_from, d.day_start) AS run_from,
  least(r.run_to, d.day_end)        AS run_to,
  r.pod
FROM runs r
-- Only the window's days can meet a run (every run lies in [$1, $2)): the calendar spans the
-- whole lake, and this join compares every run with every day it holds.
JOIN (SELECT * FROM calendar WHERE day_start < $2 AND day_end > $1) d
  ON d.day_start < r.run_to AND d.day_end > r.run_from
