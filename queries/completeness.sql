-- DCGM samples present per day of the window [$1, $2).
--   $1, $2  window start and end (TIMESTAMP, UTC), half-open
--   $3, $4  first and last `date` partition of the window (pruning)
-- A day is complete when every GPU (or MIG instance) has a measured row at every step it
-- existed: `unit_steps` counts each (unit, step) with any row, rows of `__unmeasured__` (GPU
-- time of the pool no sample covered, even within the lookback) included, as expected but not
-- present. A GPU that did not exist (an autoscaled node before it joined or after it left, a
-- replaced board's old UUID) has no row and is not expected. `first_ts`/`last_ts` and the units
-- with a row there say where a day collected only in part stops. A step split between holders (a pod left and the
-- next arrived inside it) has one row per part; it counts once, as one measured unit-step: rows
-- of a whole GPU at share 1 are one step each, the rest (parts, MIG instances, time-sliced
-- pods) are grouped by (unit, step) first and counted once each (a GROUP BY, which spills
-- under the memory limit, where COUNT DISTINCT over text keys does not). `util_rows` counts the same way the measured unit-steps
-- that carry a utilisation value: a row whose utilisation was missing, NaN or Inf is stored as
-- null, present as a GPU row but not as utilisation. `energy_rows` likewise those that carry
-- energy (a counter delta or power x step): a GPU whose power and energy read NaN, Inf or a
-- DCGM blank bills no energy there, and is counted short here rather than billed as zero.
WITH measured AS (
  SELECT s.date, s.gpu_uuid, s.gpu_instance_id, s.ts, s.share, s.util_pct, s.energy_j, s.step_s
  FROM gpu_samples s
  WHERE s.date >= $3 AND s.date <= $4
    AND s.ts >= $1 AND s.ts < $2
    AND (s.namespace IS NULL OR s.namespace <> '__unmeasured__')
),
split_steps AS (
  SELECT s.date, s.gpu_uuid, s.gpu_instance_id, s.ts,
         MAX(CASE WHEN s.namespace IS NULL OR s.namespace <> '__unmeasured__' THEN 1 ELSE 0 END) AS measured,
         MAX(CASE WHEN (s.namespace IS NULL OR s.namespace <> '__unmeasured__') AND s.util_pct IS NOT NULL THEN 1 ELSE 0 END) AS has_util,
         MAX(CASE WHEN (s.namespace IS NULL OR s.namespace <> '__unmeasured__') AND s.energy_j IS NOT NULL THEN 1 ELSE 0 END) AS has_energy
  FROM gpu_samples s
  WHERE s.date >= $3 AND s.date <= $4
    AND s.ts >= $1 AND s.ts < $2
    AND s.share < 1
  GROUP BY s.date, s.gpu_uuid, s.gpu_instance_id, s.ts
),
split_days AS (
  SELECT p.date, SUM(p.measured) AS n, SUM(p.has_util) AS with_util, SUM(p.has_energy) AS with_energy, COUNT(*) AS existed
  FROM split_steps p
  GROUP BY p.date
),
whole_existed AS (
  SELECT s.date, COUNT(*) AS n
  FROM gpu_samples s
  WHERE s.date >= $3 AND s.date <= $4
    AND s.ts >= $1 AND s.ts < $2
    AND s.share >= 1
  GROUP BY s.date
),
whole_days AS (
  SELECT m.date,
         SUM(CASE WHEN m.share >= 1 THEN 1 ELSE 0 END)                              AS n,
         SUM(CASE WHEN m.share >= 1 AND m.util_pct IS NOT NULL THEN 1 ELSE 0 END)   AS with_util,
         SUM(CASE WHEN m.share >= 1 AND m.energy_j IS NOT NULL THEN 1 ELSE 0 END)   AS with_energy
  FROM measured m
  GROUP BY m.date
),
-- The units of a day: grouped by (GPU, instance) first, not COUNT DISTINCT over a text key
-- built per row (a third of the query's time on a day of 1,024 GPUs).
unit_days AS (
  SELECT s.date, s.gpu_uuid, s.gpu_instance_id, MIN(s.step_s) AS step_s, MIN(s.ts) AS first_ts, MAX(s.ts) AS last_ts
  FROM gpu_samples s
  WHERE s.date >= $3 AND s.date <= $4
    AND s.ts >= $1 AND s.ts < $2
  GROUP BY s.date, s.gpu_uuid, s.gpu_instance_id
),
days AS (
  SELECT u.date, COUNT(*) AS units, MIN(u.step_s) AS step_s, MIN(u.first_ts) AS first_ts, MAX(u.last_ts) AS last_ts
  FROM unit_days u
  GROUP BY u.date
),
edges AS (
  SELECT d.date,
         SUM(CASE WHEN u.first_ts = d.first_ts THEN 1 ELSE 0 END) AS units_at_first,
         SUM(CASE WHEN u.last_ts = d.last_ts THEN 1 ELSE 0 END)   AS units_at_last
  FROM days d
  JOIN unit_days u ON u.date = d.date
  GROUP BY d.date
)
SELECT
  d.date                                                  AS date,
  COALESCE(w.n, 0) + COALESCE(p.n, 0)                     AS gpu_rows,
  COALESCE(w.with_util, 0) + COALESCE(p.with_util, 0)     AS util_rows,
  COALESCE(w.with_energy, 0) + COALESCE(p.with_energy, 0) AS energy_rows,
  d.units                                                 AS units,
  d.step_s                                                AS step_s,
  COALESCE(x.n, 0) + COALESCE(p.existed, 0)               AS unit_steps,
  d.first_ts                                              AS first_ts,
  d.last_ts                                               AS last_ts,
  e.units_at_first                                        AS units_at_first,
  e.units_at_last                                         AS units_at_last
FROM days d
JOIN edges e ON e.date = d.date
LEFT JOIN whole_days w ON w.date = d.date
LEFT JOIN split_days p ON p.date = d.date
LEFT JOIN whole_existed x ON x.date = d.date
ORDER BY d.date
