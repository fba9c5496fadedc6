-- Where does capacity sit unused: unallocated GPU-hours per node and GPU model, at list price?
-- gpuledger query -f queries/examples/09-unallocated-by-node.sql --param month=2026-10
SELECT
  node,
  gpu_model,
  ROUND(SUM(gpu_hours), 4)                        AS unallocated_gpu_hours,
  CAST(SUM(cloud_cost) AS DECIMAL(20, 2))         AS unallocated_cloud_cost
FROM usage
WHERE month = $month AND namespace = '__unallocated__'
GROUP BY node, gpu_model
ORDER BY unallocated_gpu_hours DESC, node
