-- The chargeback's 15-minute sums (`gpu_buckets`: src/lake/passes/gpu_buckets.rs, or the lake's
-- rollups) with their GPU time as integers, the same definition as `gpu_time.sql` per row: a
-- bucket row stands for `n` GPU rows with the same share and step (`util_n` of them with a
-- utilisation value), so n x the rounded per-row value is the sum of the per-row values.
-- Read by `chargeback_grain.sql` (priced) and `cluster_totals.sql` (the conservation line);
-- defined over each batch of buckets as it is registered.
SELECT
  x.*,
  x.n * CAST(ROUND(x.share * x.step_s * 1000000) AS BIGINT)       AS gpu_us,
  x.util_n * CAST(ROUND(x.share * x.step_s * 1000000) AS BIGINT)  AS util_known_gpu_us
FROM gpu_buckets x
