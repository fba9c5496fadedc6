-- The recorded demand a plan replays: every pod asking for GPUs whose life touches [$1, $2)
-- (created before the window's end, not finished before its start), of one cluster.
--   $1, $2  window (TIMESTAMP, UTC); $4 last `date` partition (pods are partitioned by the
--   day they were created, so a pod created before the window lives in an earlier one)
--   $5      the cluster ('' for a lake of one)
-- Unordered: the plan sorts the pods (by created, namespace, name, uid) as it reads them, so
-- a month of a million pods is not held twice, once in a sort here and once as its rows.
SELECT
  COALESCE(CAST(p.cluster AS VARCHAR), 'default')          AS cluster,
  CAST(p.namespace AS VARCHAR)                              AS namespace,
  p.pod                                                     AS pod,
  p.uid                                                     AS uid,
  CAST(p.node AS VARCHAR)                                   AS node,
  COALESCE(CAST(p.priority_class AS VARCHAR), '')           AS priority_class,
  CAST(p.created AS BIGINT)                                 AS created_ms,
  CAST(p.scheduled AS BIGINT)                               AS scheduled_ms,
  CAST(p.started AS BIGINT)                                 AS started_ms,
  CAST(p.finished AS BIGINT)                                AS finished_ms,
  COALESCE(CAST(p.gpu_resource AS VARCHAR), 'nvidia.com/gpu') AS gpu_resource,
  CAST(p.gpu_request AS BIGINT)                             AS gpu_request,
  CAST(p.termination_reason AS VARCHAR)                     AS termination_reason
FROM pods p
WHERE p.date <= $4
  AND p.created < $2
  AND (p.finished IS NULL OR p.finished >= $1)
  AND p.gpu_request > 0
  AND ($5 = '' OR COALESCE(CAST(p.cluster AS VARCHAR), 'default') = $5)
