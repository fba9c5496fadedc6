-- Chargeback, step 2b: the unmeasured GPU time claimed by pods bound on nodes whose exporter
-- reports pods (see `queries/chargeback.sql`): per node and day, each namespace's pods'
-- requested GPU time less what the samples measured for it there is its claim on the
-- node-day's unmeasured time (scaled down together where the claims exceed it); each
-- `__unmeasured__` row of `chargeback_grain` gives every claimant that fraction of its GPU
-- time, energy and money, rounded down. `queries/chargeback.sql` reads the result as the table
-- `chargeback_claimed` (twice: to the claimant, and off `__unmeasured__`). Usually empty.
WITH grain AS (
  SELECT * FROM chargeback_grain
),
-- Nodes whose exporter reports pods, with their GPU model.
mapped AS (
  SELECT n.cluster, n.node, MAX(n.gpu_model) AS gpu_model
  FROM grain n
  GROUP BY n.cluster, n.node
  HAVING SUM(CASE WHEN n.namespace <> '__unallocated__' AND n.namespace <> '__unmeasured__' THEN 1 ELSE 0 END) > 0
),
-- Their unmeasured GPU time per day.
unmeasured_day AS (
  SELECT n.cluster, n.node, n.date, SUM(n.gpu_us) AS gpu_us
  FROM grain n
  JOIN mapped m ON m.cluster = n.cluster AND m.node = n.node
  WHERE n.namespace = '__unmeasured__'
  GROUP BY n.cluster, n.node, n.date
  HAVING SUM(n.gpu_us) > 0
),
-- What the samples measured per namespace on those node-days, and what its pods requested.
measured_ns AS (
  SELECT n.cluster, n.node, n.date, n.namespace, SUM(n.gpu_us) AS gpu_us
  FROM grain n
  JOIN unmeasured_day d ON d.cluster = n.cluster AND d.node = n.node AND d.date = n.date
  WHERE n.namespace <> '__unallocated__' AND n.namespace <> '__unmeasured__'
  GROUP BY n.cluster, n.node, n.date, n.namespace
),
requested_ns AS (
  SELECT r.cluster, r.node, r.date, r.namespace,
    SUM(CAST(r.gpu_request AS DOUBLE) * 1000 * CAST(CAST(r.run_to AS BIGINT) - CAST(r.run_from AS BIGINT) AS DOUBLE) *
        CASE WHEN r.gpu_resource LIKE 'nvidia.com/mig-%'
          THEN least(COALESCE(TRY_CAST(split_part(substr(r.gpu_resource, 16), 'g', 1) AS DOUBLE), 7.0)
                     / CASE WHEN m.gpu_model LIKE '%A30%' THEN 4.0 ELSE 7.0 END, 1.0)
          ELSE 1.0 END) AS gpu_us
  FROM pod_run_days r
  JOIN mapped m ON m.cluster = r.cluster AND m.node = r.node
  JOIN unmeasured_day d ON d.cluster = r.cluster AND d.node = r.node AND d.date = r.date
  WHERE r.gpu_request > 0 AND r.run_to > r.run_from
  GROUP BY r.cluster, r.node, r.date, r.namespace
),
shortfall AS (
  SELECT q.cluster, q.node, q.date, q.namespace, q.gpu_us - CAST(COALESCE(m.gpu_us, 0) AS DOUBLE) AS gpu_us
  FROM requested_ns q
  LEFT JOIN measured_ns m ON m.cluster = q.cluster AND m.node = q.node AND m.date = q.date AND m.namespace = q.namespace
  WHERE q.gpu_us > CAST(COALESCE(m.gpu_us, 0) AS DOUBLE)
),
-- Each claimant's fraction of its node-day's unmeasured time.
claim AS (
  SELECT s.cluster, s.node, s.date, s.namespace,
    s.gpu_us / greatest(CAST(d.gpu_us AS DOUBLE), t.gpu_us) AS fraction
  FROM shortfall s
  JOIN (SELECT cluster, node, date, SUM(gpu_us) AS gpu_us FROM shortfall GROUP BY cluster, node, date) t
    ON t.cluster = s.cluster AND t.node = s.node AND t.date = s.date
  JOIN unmeasured_day d ON d.cluster = s.cluster AND d.node = s.node AND d.date = s.date
)
-- The claimed part of every unmeasured row.
SELECT n.cluster, c.namespace, n.gpu_model, n.mig_profile, n.date,
  CAST(floor(CAST(n.gpu_us AS DOUBLE) * c.fraction) AS BIGINT)                  AS gpu_us,
  CAST(floor(CAST(n.energy_mj AS DOUBLE) * c.fraction) AS BIGINT)               AS energy_mj,
  CAST(floor(CAST(n.util_gpu_us AS DOUBLE) * c.fraction) AS BIGINT)             AS util_gpu_us,
  CAST(floor(CAST(n.util_known_gpu_us AS DOUBLE) * c.fraction) AS BIGINT)       AS util_known_gpu_us,
  CAST(CAST(n.gpu_cost_us AS DOUBLE) * c.fraction AS DECIMAL(38, 12))           AS gpu_cost_us,
  CAST(CAST(n.power_cost_mj AS DOUBLE) * c.fraction AS DECIMAL(38, 12))         AS power_cost_mj,
  CAST(CAST(n.carbon_mg AS DOUBLE) * c.fraction AS DECIMAL(38, 12))             AS carbon_mg,
  CAST(floor(CAST(n.unpriced_gpu_us AS DOUBLE) * c.fraction) AS BIGINT)         AS unpriced_gpu_us
FROM grain n
JOIN claim c ON c.cluster = n.cluster AND c.node = n.node AND c.date = n.date
WHERE n.namespace = '__unmeasured__'
