-- Node names are per cluster: a node of a cluster other than `default` is `cluster/node`.
-- The pool seen in [$1, $2): one row per GPU (or MIG instance), from the daily inventory, with
-- its index on the node (a replaced board is another UUID at the same index, later).
--   $3, $4  first and last `date` partition of the window
SELECT
  CASE WHEN n.cluster IS NULL OR CAST(n.cluster AS VARCHAR) = 'default' THEN CAST(n.node AS VARCHAR)
       ELSE concat(CAST(n.cluster AS VARCHAR), '/', CAST(n.node AS VARCHAR)) END AS node,
  CAST(n.gpu_model AS VARCHAR)             AS gpu_model,
  CAST(n.gpu_uuid AS VARCHAR)              AS gpu_uuid,
  CAST(n.mig_profile AS VARCHAR)           AS mig_profile,
  CAST(n.gpu_instance_id AS BIGINT)        AS gpu_instance_id,
  CAST(n.gpu_index AS BIGINT)              AS gpu_index,
  CAST(MAX(n.mem_total_mib) AS BIGINT)     AS mem_total_mib,
  MIN(n.first_seen)                        AS first_seen,
  MAX(n.last_seen)                         AS last_seen
FROM nodes n
WHERE n.date >= $3 AND n.date <= $4
  AND n.last_seen >= $1 AND n.first_seen < $2
GROUP BY 1, 2, 3, 4, 5, 6
ORDER BY 1, 2, 3, 4, 5, 6
