-- Pods created in [$1, $2) with their wait for a node (scheduled - created, ms; NULL while
-- still pending), for the wait-time percentiles computed from them; the cluster (null as
-- `default`) names the pod by a key of each pod (`--by workload`, `queue`, ...).
--   $3, $4  first and last `date` partition (pods are partitioned by their creation day)
SELECT
  CAST(p.namespace AS VARCHAR)                                  AS namespace,
  COALESCE(CAST(p.priority_class AS VARCHAR), '')               AS priority_class,
  p.pod                                                         AS pod,
  p.uid                                                         AS uid,
  CAST(p.gpu_request AS BIGINT)                                 AS gpu_request,
  p.created                                                     AS created,
  CAST(p.scheduled AS BIGINT) - CAST(p.created AS BIGINT)       AS wait_ms,
  COALESCE(CAST(p.cluster AS VARCHAR), 'default')               AS cluster
FROM pods p
WHERE p.date >= $3 AND p.date <= $4
  AND p.created >= $1 AND p.created < $2
ORDER BY 1, 2, 6, 3, 4
