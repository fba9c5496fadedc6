-- GPU time no pod held over the window, per node and GPU model, and its list price (the
-- whole-GPU rate of `gpu_rates` times the time: a MIG slice at its share of the GPU price).
-- Reads `unallocated_units`: the window's gpu_samples rows with no namespace summed per GPU
-- unit and 15-minute bucket (gpu_us = SUM(ROUND(share x step_s x 1e6)), as gpu_time's), from
-- the lake's rollups or the rows themselves (src/lake/day_sums.rs); the per-row form is
-- benches/sql/idle_unallocated.sql.
-- Summed per GPU (or MIG instance) and UTC day before prices are joined (they change at UTC
-- midnights, so a day's rows share one price): a unit counted once per node and model.
WITH per_unit_day AS (
  SELECT
    CASE WHEN CAST(u.cluster AS VARCHAR) = 'default' THEN CAST(u.node AS VARCHAR)
         ELSE concat(CAST(u.cluster AS VARCHAR), '/', CAST(u.node AS VARCHAR)) END AS node,
    CAST(u.gpu_model AS VARCHAR)                AS gpu_model,
    u.gpu_uuid                                  AS gpu_uuid,
    u.gpu_instance_id                           AS gpu_instance_id,
    CAST(CAST(u.bucket AS DATE) AS TIMESTAMP)   AS day,
    SUM(u.gpu_us)                               AS gpu_us
  FROM unallocated_units u
  GROUP BY 1, 2, 3, 4, 5
),
per_unit AS (
  SELECT u.node, u.gpu_model, u.gpu_uuid, u.gpu_instance_id,
         SUM(u.gpu_us) AS gpu_us,
         SUM(CAST(u.gpu_us AS DECIMAL(38, 0)) * COALESCE(p.price_per_hour, CAST(0 AS DECIMAL(18, 6)))) AS cost_us
  FROM per_unit_day u
  LEFT JOIN gpu_rates p
    ON p.model = u.gpu_model AND p.mig_profile IS NULL
   AND u.day >= p.effective_from AND u.day < p.effective_to
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
