-- Chargeback, step 2a: the request-based fallback's rows, per namespace, on nodes whose DCGM
-- rows carry no pod at all in the window (see `queries/chargeback.sql`): the GPU time their
-- pods requested (gpu_request x running time), priced by date, with the node-day's energy,
-- power cost, carbon and utilisation split in proportion. Run once the tables
-- `chargeback_grain` (step 1) and `pod_run_days` are registered; `queries/chargeback.sql` reads
-- the result as the table `chargeback_fallback`. Usually empty.
-- (Its own query rather than a CTE of chargeback.sql: DataFusion inlines a CTE at every use,
-- and this one is used three times there.)
WITH grain AS (
  SELECT * FROM chargeback_grain
),
-- Nodes with no pod on any DCGM row in the window, and their totals per day.
unmapped AS (
  SELECT n.cluster, n.node, MAX(n.gpu_model) AS gpu_model
  FROM grain n
  GROUP BY n.cluster, n.node
  HAVING SUM(CASE WHEN n.namespace <> '__unallocated__' AND n.namespace <> '__unmeasured__' THEN 1 ELSE 0 END) = 0
),
unmapped_day AS (
  SELECT
    n.cluster, n.node, n.date,
    SUM(n.gpu_us) AS gpu_us, SUM(n.energy_mj) AS energy_mj, SUM(n.util_gpu_us) AS util_gpu_us, SUM(n.util_known_gpu_us) AS util_known_gpu_us,
    SUM(n.gpu_cost_us) AS gpu_cost_us, SUM(n.power_cost_mj) AS power_cost_mj, SUM(n.carbon_mg) AS carbon_mg,
    SUM(n.unpriced_gpu_us) AS unpriced_gpu_us
  FROM grain n
  JOIN unmapped u ON u.cluster = n.cluster AND u.node = n.node
  GROUP BY n.cluster, n.node, n.date
),
-- Requested GPU time on unmapped nodes, cut at price changes.
requested AS (
  SELECT
    r.cluster, r.namespace, r.node, u.gpu_model, r.date,
    CAST(r.gpu_request AS BIGINT) * 1000 * (
        CAST(least(r.run_to, COALESCE(g.effective_to, r.run_to)) AS BIGINT)
      - CAST(greatest(r.run_from, COALESCE(g.effective_from, r.run_from)) AS BIGINT)) AS gpu_us,
    g.price_per_hour
  FROM pod_run_days r
  JOIN unmapped u ON u.cluster = r.cluster AND u.node = r.node
  LEFT JOIN gpu_rates g
    ON g.model = u.gpu_model AND g.mig_profile IS NULL
   AND g.effective_from < r.run_to AND g.effective_to > r.run_from
  WHERE r.gpu_request > 0 AND r.run_to > r.run_from
),
requested_day AS (
  SELECT
    q.cluster, q.namespace, q.node, q.gpu_model, q.date,
    SUM(q.gpu_us)                                                                       AS gpu_us,
    CAST(SUM(CAST(q.gpu_us AS DECIMAL(38, 0)) * COALESCE(q.price_per_hour, CAST(0 AS DECIMAL(18, 6)))) AS DECIMAL(38, 12)) AS gpu_cost_us,
    SUM(CASE WHEN q.price_per_hour IS NULL THEN q.gpu_us ELSE 0 END)                    AS unpriced_gpu_us
  FROM requested q
  GROUP BY q.cluster, q.namespace, q.node, q.gpu_model, q.date
)
-- Each namespace's part of its unmapped node's day: energy, power, carbon and utilisation by
-- its share of the node's GPU time that day.
SELECT
  q.cluster, q.namespace, q.node, q.gpu_model, q.date,
  q.gpu_us,
  CAST(CAST(u.energy_mj AS DOUBLE) * (CAST(q.gpu_us AS DOUBLE) / CAST(u.gpu_us AS DOUBLE)) AS BIGINT)   AS energy_mj,
  CAST(CAST(u.util_gpu_us AS DOUBLE) * (CAST(q.gpu_us AS DOUBLE) / CAST(u.gpu_us AS DOUBLE)) AS BIGINT) AS util_gpu_us,
  CAST(CAST(u.util_known_gpu_us AS DOUBLE) * (CAST(q.gpu_us AS DOUBLE) / CAST(u.gpu_us AS DOUBLE)) AS BIGINT) AS util_known_gpu_us,
  q.gpu_cost_us,
  CAST(CAST(u.power_cost_mj AS DOUBLE) * (CAST(q.gpu_us AS DOUBLE) / CAST(u.gpu_us AS DOUBLE)) AS DECIMAL(38, 12)) AS power_cost_mj,
  CAST(CAST(u.carbon_mg AS DOUBLE) * (CAST(q.gpu_us AS DOUBLE) / CAST(u.gpu_us AS DOUBLE)) AS DECIMAL(38, 12))     AS carbon_mg,
  q.unpriced_gpu_us
FROM requested_day q
JOIN unmapped_day u ON u.cluster = q.cluster AND u.node = q.node AND u.date = q.date
WHERE u.gpu_us > 0
