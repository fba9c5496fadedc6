-- One row per pod (uid) with its team, wait and run time.
--   namespace: the pod's namespace
--   pod: pod name (a name can be reused; uid tells pods apart)
--   uid: the pod's unique id
--   team: team of the namespace (config [teams], else the pod's team label)
--   priority_class: the pod's PriorityClass
--   node: node it ran on, NULL if never scheduled
--   gpu_request: GPUs (or MIG slices) requested
--   created: when the pod was created (UTC)
--   scheduled: when it was bound to a node, NULL if it never was
--   started: when its containers started
--   finished: when it finished, NULL while running
--   wait_s: seconds from created to scheduled (NULL if never scheduled)
--   run_s: seconds from started to finished (NULL while running)
--   gpu_hours_requested: gpu_request x run_s / 3600 (request-based, not measured)
--   phase: last phase seen (Running, Succeeded, Failed, ...)
--   termination_reason: Completed, OOMKilled, Error, Preempted, Evicted, ...
--   succeeded: true when the pod finished with Completed
--   month: YYYY-MM of the creation day (UTC)
SELECT
  CAST(p.namespace AS VARCHAR)                                      AS namespace,
  p.pod,
  p.uid,
  COALESCE(t.team, CAST(p.team AS VARCHAR))                         AS team,
  CAST(p.priority_class AS VARCHAR)                                 AS priority_class,
  CAST(p.node AS VARCHAR)                                           AS node,
  p.gpu_request,
  p.created,
  p.scheduled,
  p.started,
  p.finished,
  (CAST(p.scheduled AS BIGINT) - CAST(p.created AS BIGINT)) / 1000.0 AS wait_s,
  (CAST(p.finished AS BIGINT) - CAST(p.started AS BIGINT)) / 1000.0  AS run_s,
  p.gpu_request * (CAST(p.finished AS BIGINT) - CAST(p.started AS BIGINT)) / 3600000.0 AS gpu_hours_requested,
  CAST(p.phase AS VARCHAR)                                          AS phase,
  CAST(p.termination_reason AS VARCHAR)                             AS termination_reason,
  COALESCE(CAST(p.termination_reason AS VARCHAR) = 'Completed', false) AS succeeded,
  concat(split_part(p.date, '-', 1), '-', split_part(p.date, '-', 2))                                            AS month
FROM pods p
LEFT JOIN teams t ON t.namespace = CAST(p.namespace AS VARCHAR)
