-- The per-row form of queries/idle_unallocated.sql, over every gpu_samples row (the tests'
-- oracle, and DuckDB's side of the benchmark); gpuledger sums the same per unit and bucket first.
-- GPU time no pod held over [$1, $2), per node and GPU model, and its list price (the
-- whole-GPU rate of `gpu_rates` times the time: a MIG slice at its share of the GPU price).
--   $1, $2  window (TIMESTAMP, UTC); $3, $4 first and last `date` partition
-- Summed per GPU (or MIG instance) and day before prices are joined (they change at UTC
-- midnights, so a day's rows share one price): the join sees a row per unit-day, not per
-- sample; a unit counted once per node and model.
WITH per_unit_day AS (
  SELECT
    g.node_name                   AS node,
    CAST(g.gpu_model AS VARCHAR)  AS gpu_model,
    g.gpu_uuid                    AS gpu_uuid,
    g.gpu_instance_id             AS gpu_instance_id,
    g.date                        AS date,
    SUM(g.gpu_us)                 AS gpu_us
  FROM gpu_time g
  WHERE g.date >= $3 AND g.date <= $4
    AND g.ts >= $1 AND g.ts < $2
    AND g.namespace IS NULL
  GROUP BY 1, 2, 3, 4, 5
),
per_unit AS (
  SELECT u.node, u.gpu_model, u.gpu_uuid, u.gpu_instance_id,
         SUM(u.gpu_us) AS gpu_us,
         SUM(CAST(u.gpu_us AS DECIMAL(38, 0)) * COALESCE(p.price_per_hour, CAST(0 AS DECIMAL(18, 6)))) AS cost_us
  FROM per_unit_day u
  LEFT JOIN gpu_rates p
    ON p.model = u.gpu_model AND p.mig_profile IS NULL
   AND CAST(CAST(u.date AS DATE) AS TIMESTAMP) >= p.effective_from AND CAST(CAST(u.date AS DATE) AS TIMESTAMP) < p.effective_to
  GROUP BY 1, 2, 3, 4
)
SELECT
  u.node                AS node,
  u.gpu_model           AS gpu_model,
  COUNT(*)              AS units,
  SUM(u.gpu_us)         AS gpu_us,
  SUM(u.cost_us)        AS cost_us
FROM per_unit u
GROUP BY 1, 2
ORDER BY gpu_us DESC, node, gpu_model
