-- GPU time no pod held over [$1, $2), per node and GPU model, and its list price (the
-- whole-GPU rate of `gpu_rates` times the time: a MIG slice at its share of the GPU price).
--   $1, $2  window (TIMESTAMP, UTC); $3, $4 first and last `date` partition
SELECT
  g.node_name                                                           AS node,
  CAST(g.gpu_model AS VARCHAR)                                            AS gpu_model,
  COUNT(DISTINCT concat(CAST(g.gpu_uuid AS VARCHAR), '/', COALESCE(CAST(g.gpu_instance_id AS VARCHAR), '-'))) AS units,
  SUM(g.gpu_us)                                                           AS gpu_us,
  SUM(CAST(g.gpu_us AS DECIMAL(38, 0)) * COALESCE(p.price_per_hour, CAST(0 AS DECIMAL(18, 6)))) AS cost_us
FROM gpu_time g
LEFT JOIN gpu_rates p
  ON p.model = CAST(g.gpu_model AS VARCHAR) AND p.mig_profile IS NULL AND g.ts >= p.effective_from AND g.ts < p.effective_to
WHERE g.date >= $3 AND g.date <= $4
  AND g.ts >= $1 AND g.ts < $2
  AND g.namespace IS NULL
GROUP BY 1, 2
ORDER BY gpu_us DESC, node, gpu_model
