-- Chargeback, step 1: the GPU rows of the window [$1, $2) (gpuledger's pass reads them for
-- this query: `gpu_buckets`, below), priced and summed per cluster, namespace, node, GPU
-- model, MIG profile and UTC day. `queries/chargeback.sql` reads the result as the table
-- `chargeback_grain`.
-- A GPU row stands for [ts, ts + step_s); `share` is 1 for a whole GPU, the slice fraction
-- for a MIG instance, 1/n for n pods time-slicing a GPU. GPU time with no pod is
-- `__unallocated__`. Quantities are integers (GPU-microseconds, millijoules) and money
-- DECIMAL not yet divided by 3.6e9 (`*_us`: per-hour price x microseconds; `*_mj`: per-kWh
-- price x millijoules), so nothing depends on the order rows are added in.
-- The rows come summed per 15-minute bucket (with its UTC `day`; and per share and step, so every per-row
-- rounding below is the number of rows x the same rounded value) as the table `gpu_buckets`
-- (read through the view `gpu_bucket_time`),
-- made by one pass over the day files (src/lake/passes/gpu_buckets.rs; the same in SQL:
-- benches/sql/gpu_buckets.sql): prices change only at bucket edges (gpu_rates at UTC
-- midnights, the tariff per bucket), so the joins see about a hundredth of the rows and price
-- them exactly as they would row by row.
-- GPU time from `gpu_bucket_time` (queries/views/gpu_bucket_time.sql). Prices: the one
-- resolved rate of `gpu_rates` (src/pricing/tables.rs: a MIG instance pays its own profile's
-- price per instance-hour where one is configured, time / unit_share, else its share of the GPU
-- price), each row on its dates; energy x PUE x the `power_tariff` rate of the 15-minute
-- bucket the sample starts in.
-- Prices multiply sums, not rows: the rows are first summed per day and per everything their
-- price depends on (the bucket's tariff rate; share and step, which fix the per-row rounding),
-- then priced. A DECIMAL sum of products by one price is that price times the sum, so this is
-- exactly the row-by-row price, with a few thousand multiplications instead of one per bucket row.
WITH tariffed AS (
  SELECT
    x.cluster, x.namespace, x.node, x.gpu_model, x.mig_profile, x.day, x.share, x.step_s,
    p.price_per_kwh, p.pue, p.carbon_g_per_kwh,
    SUM(x.n)                 AS n,
    SUM(x.gpu_us)            AS gpu_us,
    SUM(x.energy_mj)         AS energy_mj,
    SUM(x.util_gpu_us)       AS util_gpu_us,
    SUM(x.util_known_gpu_us) AS util_known_gpu_us,
    -- Any bucket of the day: GPU prices change only at UTC midnights.
    MIN(x.bucket)            AS at
  FROM gpu_bucket_time x
  LEFT JOIN power_tariff p
    ON x.bucket = p.bucket_start
  GROUP BY x.cluster, x.namespace, x.node, x.gpu_model, x.mig_profile, x.day, x.share, x.step_s,
           p.price_per_kwh, p.pue, p.carbon_g_per_kwh
),
priced AS (
  SELECT
    x.cluster, x.namespace, x.node, x.gpu_model, x.mig_profile, x.day,
    x.gpu_us,
    x.energy_mj,
    x.util_gpu_us,
    x.util_known_gpu_us,
    CAST(x.n * CAST(ROUND(x.share / COALESCE(o.unit_share, w.unit_share, 1.0) * x.step_s * 1000000) AS BIGINT) AS DECIMAL(38, 0))
      * COALESCE(o.price_per_hour, w.price_per_hour, CAST(0 AS DECIMAL(18, 6)))      AS gpu_cost_us,
    CAST(x.energy_mj AS DECIMAL(38, 0)) * x.pue * x.price_per_kwh                     AS power_cost_mj,
    CAST(x.energy_mj AS DECIMAL(38, 0)) * x.pue * COALESCE(x.carbon_g_per_kwh, CAST(0 AS DECIMAL(18, 6))) AS carbon_mg,
    CASE WHEN o.model IS NULL AND w.model IS NULL THEN x.gpu_us ELSE 0 END          AS unpriced_gpu_us
  FROM tariffed x
  -- A MIG slice's own profile price where one holds on the day ...
  LEFT JOIN (SELECT * FROM gpu_rates WHERE mig_profile IS NOT NULL) o
    ON x.gpu_model = o.model AND x.mig_profile = o.mig_profile
   AND x.at >= o.effective_from AND x.at < o.effective_to
  -- ... else the whole-GPU price (whole GPUs; slices pay their share of it). A profile has its
  -- own row on a date exactly when the whole-GPU row's `own_price_profiles` lists it, so this
  -- prices as one join on `r.mig_profile = x.mig_profile OR (r.mig_profile IS NULL AND
  -- strpos(r.own_price_profiles, ',' || x.mig_profile || ',') = 0)` would, with two equality
  -- joins instead of a string search.
  LEFT JOIN (SELECT * FROM gpu_rates WHERE mig_profile IS NULL) w
    ON x.gpu_model = w.model
   AND x.at >= w.effective_from AND x.at < w.effective_to
)
-- Grouped on the plain columns (the day as a DATE), named and formatted after: a few
-- thousand rows to format instead of one per bucket.
SELECT
  CAST(c.cluster AS VARCHAR) AS cluster, COALESCE(c.namespace, '__unallocated__') AS namespace, c.node, c.gpu_model, c.mig_profile,
  CAST(c.day AS VARCHAR)  AS date,
  SUM(c.gpu_us)           AS gpu_us,
  SUM(c.energy_mj)        AS energy_mj,
  SUM(c.util_gpu_us)      AS util_gpu_us,
  SUM(c.util_known_gpu_us) AS util_known_gpu_us,
  CAST(SUM(c.gpu_cost_us) AS DECIMAL(38, 12))   AS gpu_cost_us,
  CAST(SUM(c.power_cost_mj) AS DECIMAL(38, 12)) AS power_cost_mj,
  CAST(SUM(c.carbon_mg) AS DECIMAL(38, 12))     AS carbon_mg,
  SUM(c.unpriced_gpu_us)  AS unpriced_gpu_us
FROM priced c
GROUP BY c.cluster, c.namespace, c.node, c.gpu_model, c.mig_profile, c.day
