-- Cluster totals of the GPU rows in one piece of the window: the right-hand side of the
-- chargeback's conservation line. It reads `gpu_buckets` (the rows summed per 15-minute bucket,
-- from the lake's rollups or a pass over the samples: src/lake/passes/gpu_buckets.rs), the same
-- table `chargeback_grain.sql` prices, but with no price join and no grouping, so a join that
-- drops or duplicates rows, here or in `chargeback.sql`, shows as a mismatch. Each bucket row
-- stands for `n` GPU rows with the same share and step, so n x the rounded per-row value is
-- the sum of the per-row values.
SELECT
  COALESCE(SUM(n * CAST(ROUND(share * step_s * 1000000) AS BIGINT)), 0) AS gpu_us,
  COALESCE(SUM(energy_mj), 0)                                          AS energy_mj,
  COALESCE(SUM(n), 0)                                                  AS rows
FROM gpu_buckets
