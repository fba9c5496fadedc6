-- What is the pool: GPUs per node and model (MIG instances by their share) seen in the month?
-- gpuledger query -f queries/examples/12-pool-inventory.sql --param month=2026-10
SELECT
  node,
  gpu_model,
  COUNT(DISTINCT gpu_uuid)                                   AS gpus,
  COUNT(*)                                                   AS instances,
  ROUND(SUM(share), 4)                                       AS gpu_equivalents,
  MIN(first_seen)                                            AS first_seen,
  MAX(last_seen)                                             AS last_seen
FROM (
  SELECT CAST(node AS VARCHAR) AS node, CAST(gpu_model AS VARCHAR) AS gpu_model, CAST(gpu_uuid AS VARCHAR) AS gpu_uuid,
         gpu_instance_id, MAX(share) AS share, MIN(first_seen) AS first_seen, MAX(last_seen) AS last_seen
  FROM nodes
  WHERE date >= concat($month, '-01') AND date <= concat($month, '-31')
  GROUP BY 1, 2, 3, 4
) g
GROUP BY node, gpu_model
ORDER BY node, gpu_model
