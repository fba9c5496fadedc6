-- Cluster totals for the window [$1, $2), scanned independently of any namespace grouping:
-- the right-hand side of the chargeback's conservation line.
--   $1, $2  window start and end (TIMESTAMP, UTC); $3, $4  first and last `date` partition
SELECT
  COALESCE(SUM(CAST(ROUND(share * step_s * 1000000) AS BIGINT)), 0)    AS gpu_us,
  COALESCE(SUM(CAST(ROUND(COALESCE(energy_j, 0) * 1000) AS BIGINT)), 0) AS energy_mj,
  COUNT(*)                                                             AS rows,
  -- The GPUs seen in the window, from the small inventory table (a distinct count over every
  -- GPU row costs a third of this query at a month of 1,024 GPUs).
  (SELECT COUNT(DISTINCT n.gpu_uuid) FROM nodes n
    WHERE n.date >= $3 AND n.date <= $4 AND n.first_seen < $2 AND n.last_seen >= $1) AS gpus
FROM gpu_samples
WHERE date >= $3 AND date <= $4
  AND ts >= $1 AND ts < $2
