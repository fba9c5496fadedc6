-- Chargeback per namespace for the window [$1, $2).
--   $1, $2  window start and end (TIMESTAMP, UTC), half-open
--   $3, $4  first and last `date` partition that can hold rows of the window (pruning)
-- A GPU row stands for [ts, ts + step_s); `share` is 1 for a whole GPU, the slice fraction
-- for a MIG instance, 1/n for n pods time-slicing a GPU. GPU time with no pod is the
-- `__unallocated__` row. Quantities are summed as integers (GPU-microseconds, millijoules)
-- and money as DECIMAL, so the result never depends on the order rows are added in.
WITH samples AS (
  SELECT
    COALESCE(CAST(s.namespace AS VARCHAR), '__unallocated__')              AS namespace,
    CAST(s.gpu_model AS VARCHAR)                                            AS gpu_model,
    s.ts                                                                    AS ts,
    CAST(ROUND(s.share * s.step_s * 1000000) AS BIGINT)                     AS gpu_us,
    CAST(ROUND(COALESCE(s.energy_j, 0) * 1000) AS BIGINT)                   AS energy_mj,
    CAST(ROUND(COALESCE(s.util_pct, 0) * s.share * s.step_s * 1000000) AS BIGINT) AS util_gpu_us
  FROM gpu_samples s
  WHERE s.date >= $3 AND s.date <= $4
    AND s.ts >= $1 AND s.ts < $2
),
priced AS (
  SELECT
    x.namespace,
    x.gpu_us,
    x.energy_mj,
    x.util_gpu_us,
    -- GPU-microseconds x price per GPU-hour; divided by 3.6e9 below
    CAST(x.gpu_us AS DECIMAL(38, 0)) * COALESCE(g.price_per_hour, CAST(0 AS DECIMAL(18, 6)))   AS cloud_cost_us,
    -- millijoules x PUE x price per kWh; divided by 3.6e9 below
    CAST(x.energy_mj AS DECIMAL(38, 0)) * p.pue * p.price_per_kwh                              AS power_cost_mj,
    CASE WHEN g.model IS NULL THEN x.gpu_us ELSE 0 END                                         AS unpriced_gpu_us
  FROM samples x
  LEFT JOIN gpu_prices g
    ON x.gpu_model = g.model AND x.ts >= g.effective_from AND x.ts < g.effective_to
  LEFT JOIN power_prices p
    ON x.ts >= p.effective_from AND x.ts < p.effective_to
),
per_namespace AS (
  SELECT
    c.namespace,
    SUM(c.gpu_us)                                            AS gpu_us,
    SUM(c.energy_mj)                                         AS energy_mj,
    SUM(c.util_gpu_us)                                       AS util_gpu_us,
    SUM(c.cloud_cost_us) / CAST(3600000000 AS DECIMAL(38, 0)) AS cloud_cost,
    SUM(c.power_cost_mj) / CAST(3600000000 AS DECIMAL(38, 0)) AS power_cost,
    SUM(c.unpriced_gpu_us)                                   AS unpriced_gpu_us
  FROM priced c
  GROUP BY c.namespace
)
SELECT n.namespace, t.team, n.gpu_us, n.energy_mj, n.util_gpu_us, n.cloud_cost, n.power_cost, n.unpriced_gpu_us
FROM per_namespace n
LEFT JOIN teams t ON t.namespace = n.namespace
ORDER BY n.namespace
