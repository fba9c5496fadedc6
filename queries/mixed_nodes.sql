-- Nodes whose daily inventory holds two GPUs at one index at the same time over [$1, $2): two
-- nodes under one name, as when a Thanos or Mimir holding several clusters was collected
-- without `prometheus.cluster_label` (the clusters mixed in the lake), or an exporter without
-- the `gpu` label. A replaced board is another UUID at the index later, not at the same time.
-- Node names are per cluster: a node of a cluster other than `default` is `cluster/node`.
--   $1, $2  window start and end (TIMESTAMP, UTC); $3, $4 first and last `date` partition
WITH gpus AS (
  SELECT n.cluster, n.node, n.date, n.gpu_index, n.gpu_uuid, MIN(n.first_seen) AS first_seen, MAX(n.last_seen) AS last_seen
  FROM nodes n
  WHERE n.date >= $3 AND n.date <= $4
    AND n.last_seen >= $1 AND n.first_seen < $2
  GROUP BY n.cluster, n.node, n.date, n.gpu_index, n.gpu_uuid
)
SELECT
  CASE WHEN a.cluster IS NULL OR CAST(a.cluster AS VARCHAR) = 'default' THEN CAST(a.node AS VARCHAR)
       ELSE concat(CAST(a.cluster AS VARCHAR), '/', CAST(a.node AS VARCHAR)) END AS node,
  COUNT(DISTINCT a.gpu_index)                                                   AS gpu_indexes
FROM gpus a
JOIN gpus b
  ON a.cluster = b.cluster AND a.node = b.node AND a.date = b.date AND a.gpu_index = b.gpu_index
 AND CAST(a.gpu_uuid AS VARCHAR) < CAST(b.gpu_uuid AS VARCHAR)
 AND a.first_seen <= b.last_seen AND b.first_seen <= a.last_seen
GROUP BY 1
ORDER BY 1
