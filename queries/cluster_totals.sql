-- Cluster totals for the window [$1, $2), scanned independently of any namespace grouping:
-- the right-hand side of the chargeback's conservation line.
--   $1, $2  window start and end (TIMESTAMP, UTC); $3, $4  first and last `date` partition
SELECT
  COALESCE(SUM(CAST(ROUND(share * step_s * 1000000) AS BIGINT)), 0)    AS gpu_us,
  COALESCE(SUM(CAST(ROUND(COALESCE(energy_j, 0) * 1000) AS BIGINT)), 0) AS energy_mj,
  COUNT(*)                                                             AS rows,
  COUNT(DISTINCT gpu_uuid)                                             AS gpus
FROM gpu_samples
WHERE date >= $3 AND date <= $4
  AND ts >= $1 AND ts < $2
