-- Cluster totals of the GPU rows in one piece of the window: the right-hand side of the
-- chargeback's conservation line. It reads `gpu_bucket_time` (the rows summed per 15-minute
-- bucket, from the lake's rollups or a pass over the samples: src/lake/passes/gpu_buckets.rs,
-- with their GPU time: queries/views/gpu_bucket_time.sql), the same rows `chargeback_grain.sql`
-- prices, but with no price join and no grouping, so a join that drops or duplicates rows, here
-- or in `chargeback.sql`, shows as a mismatch.
SELECT
  COALESCE(SUM(gpu_us), 0)    AS gpu_us,
  COALESCE(SUM(energy_mj), 0) AS energy_mj,
  COALESCE(SUM(n), 0)         AS rows
FROM gpu_bucket_time
