-- Per pod (namespace, pod, GPU model) over [$1, $2): GPU time held, GPU time idle in runs of
-- at least $6 seconds under $5 % utilisation (allocated but idle), and the shape of its
-- utilisation (steps, idle steps, drops from busy to idle) that tells a data-starved job.
-- The runs themselves are found in one streaming pass over gpu_samples
-- (src/lake/passes/idle_runs.rs, parameters $1, $2, $5 and $6) and handed in as two tables:
--   idle_holding  per GPU unit and pod: held_gpu_us, steps, idle_steps, drops
--   idle_runs     per idle run of at least $6 seconds, or short of it by at most the run's mean
--                 step: start, steps, secs, gpu_us
-- An idle run's cost uses the GPU model's price at the run's start.
-- The grid measures a run's length to a step: a run within a step of $6 either side is in or
-- out by where its first and last scrapes fell. edge_in_gpu_us (counted runs under $6 plus a
-- step) and edge_out_gpu_us (runs a step short) are the idle figure's band at the grid's
-- resolution. "Within a step": secs < $6 + secs / steps, in integers secs * steps < $6 * steps + secs.
WITH idle AS (
  SELECT
    x.namespace, x.pod, x.gpu_model,
    SUM(CASE WHEN x.secs >= $6 THEN x.gpu_us ELSE 0 END)                               AS idle_gpu_us,
    SUM(CASE WHEN x.secs >= $6 THEN 1 ELSE 0 END)                                      AS idle_runs,
    SUM(CASE WHEN x.secs >= $6 THEN CAST(x.gpu_us AS DECIMAL(38, 0)) * COALESCE(p.price_per_hour, CAST(0 AS DECIMAL(18, 6))) END) AS idle_cost_us,
    SUM(CASE WHEN x.secs >= $6 AND x.secs * x.steps < $6 * x.steps + x.secs THEN x.gpu_us ELSE 0 END) AS edge_in_gpu_us,
    SUM(CASE WHEN x.secs < $6 THEN x.gpu_us ELSE 0 END)                                AS edge_out_gpu_us
  FROM idle_runs x
  LEFT JOIN gpu_rates p ON p.model = x.gpu_model AND p.mig_profile IS NULL AND x.start >= p.effective_from AND x.start < p.effective_to
  GROUP BY x.namespace, x.pod, x.gpu_model
),
held AS (
  SELECT
    h.namespace, h.pod, h.gpu_model,
    SUM(h.held_gpu_us)                                            AS held_gpu_us,
    SUM(h.steps)                                                  AS steps,
    SUM(h.idle_steps)                                             AS idle_steps,
    SUM(h.drops)                                                  AS drops
  FROM idle_holding h
  GROUP BY h.namespace, h.pod, h.gpu_model
)
SELECT
  h.namespace, h.pod, h.gpu_model, h.held_gpu_us, h.steps, h.idle_steps, h.drops,
  COALESCE(i.idle_gpu_us, 0)                                       AS idle_gpu_us,
  COALESCE(i.idle_runs, 0)                                         AS idle_runs,
  COALESCE(i.idle_cost_us, CAST(0 AS DECIMAL(38, 6)))               AS idle_cost_us,
  COALESCE(i.edge_in_gpu_us, 0)                                    AS edge_in_gpu_us,
  COALESCE(i.edge_out_gpu_us, 0)                                   AS edge_out_gpu_us
FROM held h
LEFT JOIN idle i ON (i.namespace IS NOT DISTINCT FROM h.namespace) AND i.pod = h.pod AND i.gpu_model = h.gpu_model
ORDER BY 1, 2, 3
