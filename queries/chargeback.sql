-- Chargeback, step 2: the detail rows for the window [$1, $2), one per cluster, namespace, GPU
-- model, MIG profile and UTC day (node names are per cluster: every join on a node is on the
-- cluster too), from `chargeback_grain` (step 1, `queries/chargeback_grain.sql`)
-- and the pods table. The chargeback (per namespace, team or cost centre), the by-model
-- report and the FOCUS export are all sums of these rows, so they agree to the unit.
--   $1, $2  window start and end (TIMESTAMP, UTC), half-open; $4 the last `date` partition
--
-- Request-based fallback: a node whose DCGM rows carry no pod at all in the window (an
-- exporter without the pod mapping) has its GPU time given to the pods that ran there,
-- gpu_request x running time (kube-state-metrics), priced by date; its energy, power cost,
-- carbon and utilisation are split in proportion to that time, per day; the rest stays
-- unallocated. Those rows carry `request_based_gpu_us`. A node with no DCGM exporter at all
-- has only rows of `__unmeasured__` (the GPU time kube-state-metrics says it had): the same
-- fallback gives it to the pods that ran there. (The fallback's rows per namespace, and the
-- unallocated rest of each node-day, marked `unallocated_rest`, come as the table
-- `chargeback_fallback`: `queries/chargeback_fallback.sql`, run before this query.)
--
-- On a node whose exporter reports pods, GPU time no sample covered (an exporter outage beyond
-- the lookback) is `__unmeasured__`, except the part a pod bound there held: per node and day,
-- each namespace's pods' requested GPU time less what the samples measured for it there is its
-- claim on the node-day's unmeasured time (scaled down together where the claims exceed it);
-- each unmeasured row (model, MIG profile) gives every claimant that fraction of its GPU time,
-- energy and money, rounded down, and keeps the rest. Those rows carry `request_based_gpu_us`
-- too. A request counts whole GPUs, or a MIG instance's share of its GPU. (The claimed rows
-- come as the table `chargeback_claimed`: `queries/chargeback_claimed.sql`, run before this.)
--
-- CPU and memory: cpu_request x running time and memory request x running time of every
-- pod, priced piecewise by `cpu_prices` and `memory_prices` (empty tables: no charge); these
-- rows have no GPU model. The pods' running time per day comes as the table `pod_run_days`
-- (`queries/pod_run_days.sql`, run once before this query).
WITH grain AS (
  SELECT * FROM chargeback_grain
),
-- The fallback's rows per namespace (`queries/chargeback_fallback.sql`, run before this query).
fallback AS (
  SELECT * FROM chargeback_fallback WHERE NOT unallocated_rest
),
-- The claimed part of every unmeasured row (`queries/chargeback_claimed.sql`, run before this query).
claimed AS (
  SELECT * FROM chargeback_claimed
),
-- CPU core-microseconds and memory GiB-microseconds requested, cut at price changes.
cpu AS (
  SELECT
    r.cluster, r.namespace, r.date,
    CAST(ROUND(r.cpu_request * 1000 * (
        CAST(least(r.run_to, c.effective_to) AS BIGINT) - CAST(greatest(r.run_from, c.effective_from) AS BIGINT))) AS BIGINT) AS core_us,
    c.price_per_core_hour
  FROM pod_run_days r
  JOIN cpu_prices c ON c.effective_from < r.run_to AND c.effective_to > r.run_from
  WHERE r.cpu_request > 0 AND r.run_to > r.run_from
),
mem AS (
  SELECT
    r.cluster, r.namespace, r.date,
    CAST(ROUND(CAST(r.mem_request_bytes AS DOUBLE) / 1073741824.0 * 1000 * (
        CAST(least(r.run_to, m.effective_to) AS BIGINT) - CAST(greatest(r.run_from, m.effective_from) AS BIGINT))) AS BIGINT) AS gib_us,
    m.price_per_gib_hour
  FROM pod_run_days r
  JOIN memory_prices m ON m.effective_from < r.run_to AND m.effective_to > r.run_from
  WHERE r.mem_request_bytes > 0 AND r.run_to > r.run_from
),
-- Every row of the chargeback, one leg per kind: `sign` -1 takes the row off (claimed
-- unmeasured time leaves `__unmeasured__`), `request_based` 1 marks GPU time charged by
-- request. (One flat UNION under the aggregate: Ballista's plan decoder refuses plans nested
-- deeper than prost's recursion limit.)
parts AS (
  SELECT n.cluster AS cluster, n.namespace AS namespace, n.gpu_model AS gpu_model, n.mig_profile AS mig_profile, n.date AS date,
         1 AS sign, 0 AS request_based,
         n.gpu_us AS gpu_us, n.energy_mj AS energy_mj, n.util_gpu_us AS util_gpu_us, n.util_known_gpu_us AS util_known_gpu_us,
         n.gpu_cost_us AS gpu_cost_us, n.power_cost_mj AS power_cost_mj, n.carbon_mg AS carbon_mg, n.unpriced_gpu_us AS unpriced_gpu_us,
         CAST(0 AS BIGINT) AS core_us, CAST(0 AS DECIMAL(38, 12)) AS cpu_cost_us, CAST(0 AS BIGINT) AS gib_us, CAST(0 AS DECIMAL(38, 12)) AS mem_cost_us
  FROM grain n
  -- The node-days without a request-based fallback. (An inner join to a grouped marker rather
  -- than NOT EXISTS: Ballista 55 never finishes that anti join when `fallback` is empty, which
  -- it usually is.)
  JOIN (
    SELECT m.cluster, m.node, m.date
    FROM (SELECT g.cluster, g.node, g.date, 0 AS in_fallback FROM grain g
          UNION ALL
          SELECT f.cluster, f.node, f.date, 1 AS in_fallback FROM fallback f) m
    GROUP BY m.cluster, m.node, m.date
    HAVING MAX(m.in_fallback) = 0
  ) kept ON kept.cluster = n.cluster AND kept.node = n.node AND kept.date = n.date
  UNION ALL
  SELECT f.cluster, f.namespace, f.gpu_model, CAST(NULL AS VARCHAR), f.date, 1, 1,
         f.gpu_us, f.energy_mj, f.util_gpu_us, f.util_known_gpu_us, f.gpu_cost_us, f.power_cost_mj, f.carbon_mg, f.unpriced_gpu_us,
         CAST(0 AS BIGINT), CAST(0 AS DECIMAL(38, 12)), CAST(0 AS BIGINT), CAST(0 AS DECIMAL(38, 12))
  FROM fallback f
  UNION ALL
  -- What the pods of an unmapped node did not take that day stays unallocated.
  SELECT r.cluster, r.namespace, r.gpu_model, CAST(NULL AS VARCHAR), r.date, 1, 1,
         r.gpu_us, r.energy_mj, r.util_gpu_us, r.util_known_gpu_us, r.gpu_cost_us, r.power_cost_mj, r.carbon_mg, r.unpriced_gpu_us,
         CAST(0 AS BIGINT), CAST(0 AS DECIMAL(38, 12)), CAST(0 AS BIGINT), CAST(0 AS DECIMAL(38, 12))
  FROM chargeback_fallback r
  WHERE r.unallocated_rest
  UNION ALL
  -- Unmeasured time a pod bound there held: the claimant's, request-based ...
  SELECT k.cluster, k.namespace, k.gpu_model, k.mig_profile, k.date, 1, 1,
         k.gpu_us, k.energy_mj, k.util_gpu_us, k.util_known_gpu_us, k.gpu_cost_us, k.power_cost_mj, k.carbon_mg, k.unpriced_gpu_us,
         CAST(0 AS BIGINT), CAST(0 AS DECIMAL(38, 12)), CAST(0 AS BIGINT), CAST(0 AS DECIMAL(38, 12))
  FROM claimed k
  UNION ALL
  -- ... and taken off `__unmeasured__` (these rows sum with its own below).
  SELECT k.cluster, '__unmeasured__', k.gpu_model, k.mig_profile, k.date, -1, 0,
         k.gpu_us, k.energy_mj, k.util_gpu_us, k.util_known_gpu_us, k.gpu_cost_us, k.power_cost_mj, k.carbon_mg, k.unpriced_gpu_us,
         CAST(0 AS BIGINT), CAST(0 AS DECIMAL(38, 12)), CAST(0 AS BIGINT), CAST(0 AS DECIMAL(38, 12))
  FROM claimed k
  UNION ALL
  -- Requested CPU and memory.
  SELECT c.cluster, c.namespace, CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), c.date, 1, 0,
         CAST(0 AS BIGINT), CAST(0 AS BIGINT), CAST(0 AS BIGINT), CAST(0 AS BIGINT),
         CAST(0 AS DECIMAL(38, 12)), CAST(0 AS DECIMAL(38, 12)), CAST(0 AS DECIMAL(38, 12)), CAST(0 AS BIGINT),
         c.core_us, CAST(CAST(c.core_us AS DECIMAL(38, 0)) * c.price_per_core_hour AS DECIMAL(38, 12)), CAST(0 AS BIGINT), CAST(0 AS DECIMAL(38, 12))
  FROM cpu c
  UNION ALL
  SELECT m.cluster, m.namespace, CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), m.date, 1, 0,
         CAST(0 AS BIGINT), CAST(0 AS BIGINT), CAST(0 AS BIGINT), CAST(0 AS BIGINT),
         CAST(0 AS DECIMAL(38, 12)), CAST(0 AS DECIMAL(38, 12)), CAST(0 AS DECIMAL(38, 12)), CAST(0 AS BIGINT),
         CAST(0 AS BIGINT), CAST(0 AS DECIMAL(38, 12)), m.gib_us, CAST(CAST(m.gib_us AS DECIMAL(38, 0)) * m.price_per_gib_hour AS DECIMAL(38, 12))
  FROM mem m
)
SELECT
  a.cluster,
  a.namespace,
  a.gpu_model,
  a.mig_profile,
  a.date,
  SUM(CASE WHEN a.sign < 0 THEN -a.gpu_us ELSE a.gpu_us END)                       AS gpu_us,
  SUM(CASE WHEN a.sign < 0 THEN -a.energy_mj ELSE a.energy_mj END)                 AS energy_mj,
  SUM(CASE WHEN a.sign < 0 THEN -a.util_gpu_us ELSE a.util_gpu_us END)             AS util_gpu_us,
  SUM(CASE WHEN a.sign < 0 THEN -a.util_known_gpu_us ELSE a.util_known_gpu_us END) AS util_known_gpu_us,
  SUM(CASE WHEN a.sign < 0 THEN -a.gpu_cost_us ELSE a.gpu_cost_us END)             AS gpu_cost_us,
  SUM(CASE WHEN a.sign < 0 THEN -a.power_cost_mj ELSE a.power_cost_mj END)         AS power_cost_mj,
  SUM(CASE WHEN a.sign < 0 THEN -a.carbon_mg ELSE a.carbon_mg END)                 AS carbon_mg,
  SUM(CASE WHEN a.sign < 0 THEN -a.unpriced_gpu_us ELSE a.unpriced_gpu_us END)     AS unpriced_gpu_us,
  SUM(CASE WHEN a.request_based = 1 THEN a.gpu_us ELSE 0 END)                      AS request_based_gpu_us,
  SUM(a.core_us)               AS core_us,
  SUM(a.cpu_cost_us)           AS cpu_cost_us,
  SUM(a.gib_us)                AS gib_us,
  SUM(a.mem_cost_us)           AS mem_cost_us
FROM parts a
GROUP BY a.cluster, a.namespace, a.gpu_model, a.mig_profile, a.date
ORDER BY a.cluster, a.namespace, a.gpu_model, a.mig_profile, a.date
