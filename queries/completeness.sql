-- DCGM samples present per day of the window [$1, $2).
--   $1, $2  window start and end (TIMESTAMP, UTC), half-open
--   $3, $4  first and last `date` partition of the window (pruning)
-- A day is complete when every GPU (or MIG instance) seen that day has a measured row at every
-- step: rows of `__unmeasured__` (GPU time of the pool no sample covered, even within the
-- lookback) are expected but not present. A step split between holders (a pod left and the
-- next arrived inside it) has one row per part; it counts once, as one measured unit-step: rows
-- of a whole GPU at share 1 are one step each, the rest (parts, MIG instances, time-sliced
-- pods) count distinct (unit, step). `util_rows` counts the same way the measured unit-steps
-- that carry a utilisation value: a row whose utilisation was missing, NaN or Inf is stored as
-- null, present as a GPU row but not as utilisation.
SELECT
  s.date                                                                          AS date,
  COUNT(DISTINCT s.ts)                                                            AS steps,
  SUM(CASE WHEN (s.namespace IS NULL OR s.namespace <> '__unmeasured__') AND s.share >= 1 THEN 1 ELSE 0 END)
    + COUNT(DISTINCT CASE WHEN (s.namespace IS NULL OR s.namespace <> '__unmeasured__') AND s.share < 1
                          THEN concat(CAST(s.gpu_uuid AS VARCHAR), '/', COALESCE(CAST(s.gpu_instance_id AS VARCHAR), '-'), '@', CAST(CAST(s.ts AS BIGINT) AS VARCHAR)) END) AS gpu_rows,
  SUM(CASE WHEN (s.namespace IS NULL OR s.namespace <> '__unmeasured__') AND s.share >= 1 AND s.util_pct IS NOT NULL THEN 1 ELSE 0 END)
    + COUNT(DISTINCT CASE WHEN (s.namespace IS NULL OR s.namespace <> '__unmeasured__') AND s.share < 1 AND s.util_pct IS NOT NULL
                          THEN concat(CAST(s.gpu_uuid AS VARCHAR), '/', COALESCE(CAST(s.gpu_instance_id AS VARCHAR), '-'), '@', CAST(CAST(s.ts AS BIGINT) AS VARCHAR)) END) AS util_rows,
  COUNT(DISTINCT concat(CAST(s.gpu_uuid AS VARCHAR), '/', COALESCE(CAST(s.gpu_instance_id AS VARCHAR), '-'))) AS units,
  MIN(s.step_s)                                                                   AS step_s
FROM gpu_samples s
WHERE s.date >= $3 AND s.date <= $4
  AND s.ts >= $1 AND s.ts < $2
GROUP BY s.date
ORDER BY s.date
