-- Chargeback, step 2a: the request-based fallback's rows, per namespace, on nodes whose DCGM
-- rows carry no pod at all in the window (see `queries/chargeback.sql`): the GPU time their
-- pods requested (gpu_request x running time), priced by date, with the node-day's energy,
-- power cost, carbon and utilisation split in proportion; and, marked `unallocated_rest`, what
-- the pods did not take of each such node-day, which stays `__unallocated__`. Run once the
-- tables `chargeback_grain` (step 1) and `pod_run_days` are registered; `queries/chargeback.sql`
-- reads the result as the table `chargeback_fallback`. Usually empty.
-- (Its own query rather than CTEs of chargeback.sql: DataFusion inlines a CTE at every use,
-- and these were used three times there.)
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
    -- A HAMi vGPU is its share of the GPU's cores (`gpu_share_pct`); anything else whole.
    CASE WHEN r.gpu_share_pct IS NULL
      THEN CAST(r.gpu_request AS BIGINT) * 1000 * (
          CAST(least(r.run_to, COALESCE(g.effective_to, r.run_to)) AS BIGINT)
        - CAST(greatest(r.run_from, COALESCE(g.effective_from, r.run_from)) AS BIGINT))
      ELSE CAST(floor(CAST(r.gpu_request AS DOUBLE) * r.gpu_share_pct * 10 * CAST(
          CAST(least(r.run_to, COALESCE(g.effective_to, r.run_to)) AS BIGINT)
        - CAST(greatest(r.run_from, COALESCE(g.effective_from, r.run_from)) AS BIGINT) AS DOUBLE)) AS BIGINT)
      END AS gpu_us,
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
),
-- Requests that add up to more GPU time than the node-day had (a sharing layer, HAMi's vGPUs
-- or time-slicing replicas, counted as nvidia.com/gpu: four pods of one vGPU each on one GPU)
-- are scaled down together to fit it, so the rest never goes negative (the collect log names
-- the HAMi and multiplied-capacity nodes this happens on).
node_requested AS (
  SELECT cluster, node, date, SUM(gpu_us) AS gpu_us
  FROM requested_day
  GROUP BY cluster, node, date
),
scaled AS (
  SELECT
    q.cluster, q.namespace, q.node, q.gpu_model, q.date,
    CASE WHEN t.gpu_us > u.gpu_us
      THEN CAST(floor(CAST(q.gpu_us AS DOUBLE) * (CAST(u.gpu_us AS DOUBLE) / CAST(t.gpu_us AS DOUBLE))) AS BIGINT)
      ELSE q.gpu_us END                                                                 AS gpu_us,
    CASE WHEN t.gpu_us > u.gpu_us
      THEN CAST(CAST(q.gpu_cost_us AS DOUBLE) * (CAST(u.gpu_us AS DOUBLE) / CAST(t.gpu_us AS DOUBLE)) AS DECIMAL(38, 12))
      ELSE q.gpu_cost_us END                                                            AS gpu_cost_us,
    CASE WHEN t.gpu_us > u.gpu_us
      THEN CAST(floor(CAST(q.unpriced_gpu_us AS DOUBLE) * (CAST(u.gpu_us AS DOUBLE) / CAST(t.gpu_us AS DOUBLE))) AS BIGINT)
      ELSE q.unpriced_gpu_us END                                                        AS unpriced_gpu_us
  FROM requested_day q
  JOIN node_requested t ON t.cluster = q.cluster AND t.node = q.node AND t.date = q.date
  JOIN unmapped_day u ON u.cluster = q.cluster AND u.node = q.node AND u.date = q.date
),
-- Each namespace's part of its unmapped node's day: energy, power, carbon and utilisation by
-- its share of the node's GPU time that day.
fallback AS (
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
  FROM scaled q
  JOIN unmapped_day u ON u.cluster = q.cluster AND u.node = q.node AND u.date = q.date
  WHERE u.gpu_us > 0
),
-- What the pods of an unmapped node did not take that day stays unallocated.
fallback_rest AS (
  SELECT
    u.cluster, u.node, u.date,
    u.gpu_us - COALESCE(SUM(f.gpu_us), 0)                                          AS gpu_us,
    u.energy_mj - COALESCE(SUM(f.energy_mj), 0)                                    AS energy_mj,
    u.util_gpu_us - COALESCE(SUM(f.util_gpu_us), 0)                                AS util_gpu_us,
    u.util_known_gpu_us - COALESCE(SUM(f.util_known_gpu_us), 0)                    AS util_known_gpu_us,
    u.gpu_cost_us - COALESCE(SUM(f.gpu_cost_us), CAST(0 AS DECIMAL(38, 12)))       AS gpu_cost_us,
    u.power_cost_mj - COALESCE(SUM(f.power_cost_mj), CAST(0 AS DECIMAL(38, 12)))   AS power_cost_mj,
    u.carbon_mg - COALESCE(SUM(f.carbon_mg), CAST(0 AS DECIMAL(38, 12)))           AS carbon_mg,
    greatest(u.unpriced_gpu_us - COALESCE(SUM(f.unpriced_gpu_us), 0), 0)          AS unpriced_gpu_us
  FROM unmapped_day u
  JOIN fallback f ON f.cluster = u.cluster AND f.node = u.node AND f.date = u.date
  GROUP BY u.cluster, u.node, u.date, u.gpu_us, u.energy_mj, u.util_gpu_us, u.util_known_gpu_us, u.gpu_cost_us, u.power_cost_mj, u.carbon_mg, u.unpriced_gpu_us
)
-- The fallback's rows, then (`unallocated_rest`) what each node-day keeps as unallocated.
-- (The dates as one type: the fallback's come from `pod_run_days`, the rest's from the grain.)
SELECT
  f.cluster, f.namespace, f.node, f.gpu_model, CAST(f.date AS VARCHAR) AS date,
  f.gpu_us, f.energy_mj, f.util_gpu_us, f.util_known_gpu_us, f.gpu_cost_us, f.power_cost_mj, f.carbon_mg, f.unpriced_gpu_us,
  FALSE AS unallocated_rest
FROM fallback f
UNION ALL
SELECT
  r.cluster, '__unallocated__', r.node, u.gpu_model, CAST(r.date AS VARCHAR),
  r.gpu_us, r.energy_mj, r.util_gpu_us, r.util_known_gpu_us, r.gpu_cost_us, r.power_cost_mj, r.carbon_mg, r.unpriced_gpu_us,
  TRUE
FROM fallback_rest r
JOIN unmapped u ON u.cluster = r.cluster AND u.node = r.node
