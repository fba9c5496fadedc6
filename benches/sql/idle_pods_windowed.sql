-- The idle report's per-pod question in plain SQL (gaps and islands over every row), as a peer
-- engine would be asked it: DuckDB runs this in `benches/run.sh`, and the tests check
-- gpuledger's streaming pass (src/lake/passes/idle_runs.rs + queries/idle_pods.sql) against it.
-- At a month of 1,024 GPUs this needs several GiB (DuckDB: 12 GiB RSS; DataFusion fails in a
-- 1 GiB pool), which is why gpuledger does not run it.
--
-- Per pod (namespace, pod, GPU model) over [$1, $2): GPU time held, GPU time idle in runs of
-- at least $6 seconds under $5 % utilisation (allocated but idle), and the shape of its
-- utilisation (steps, idle steps, drops from busy to idle) that tells a data-starved job.
--   $1, $2  window (TIMESTAMP, UTC); $3, $4 first and last `date` partition
--   $5      utilisation threshold, percent (idle.util_threshold_pct)
--   $6      shortest idle run that counts, seconds (idle.min_minutes x 60)
-- Runs are found per GPU (or MIG instance) and pod with the gaps-and-islands method; an idle
-- run's cost uses the GPU model's price at the run's start.
WITH s AS (
  SELECT
    g.namespace                                                         AS namespace,
    g.pod                                                               AS pod,
    g.gpu_uuid                                                          AS gpu_uuid,
    COALESCE(g.gpu_instance_id, -1)                                     AS gi,
    g.gpu_model                                                         AS gpu_model,
    g.ts                                                                AS ts,
    g.step_s                                                            AS step_s,
    CAST(ROUND(g.share * g.step_s * 1000000) AS BIGINT)                 AS gpu_us,
    CAST(CASE WHEN COALESCE(g.util_pct, 0) < CAST($5 AS DOUBLE) THEN 1 ELSE 0 END AS TINYINT) AS idle
  FROM gpu_samples g
  WHERE g.date >= $3 AND g.date <= $4
    AND g.ts >= $1 AND g.ts < $2
    AND g.pod IS NOT NULL
),
r AS (
  SELECT
    s.*,
    ROW_NUMBER() OVER (PARTITION BY s.gpu_uuid, s.gi, s.namespace, s.pod ORDER BY s.ts)
      - ROW_NUMBER() OVER (PARTITION BY s.gpu_uuid, s.gi, s.namespace, s.pod, s.idle ORDER BY s.ts) AS island,
    LAG(s.idle, 1, 0) OVER (PARTITION BY s.gpu_uuid, s.gi, s.namespace, s.pod ORDER BY s.ts) AS prev_idle
  FROM s
),
runs AS (
  SELECT r.namespace, r.pod, r.gpu_uuid, r.gi, r.gpu_model, r.island, MIN(r.ts) AS start, SUM(r.gpu_us) AS gpu_us,
    SUM(CAST(r.step_s AS BIGINT)) AS secs, COUNT(*) AS steps
  FROM r
  WHERE r.idle = 1
  GROUP BY r.namespace, r.pod, r.gpu_uuid, r.gi, r.gpu_model, r.island
),
idle AS (
  SELECT
    x.namespace, x.pod, x.gpu_model,
    SUM(CASE WHEN x.secs >= CAST($6 AS BIGINT) THEN x.gpu_us ELSE 0 END)                AS idle_gpu_us,
    SUM(CASE WHEN x.secs >= CAST($6 AS BIGINT) THEN 1 ELSE 0 END)                       AS idle_runs,
    SUM(CASE WHEN x.secs >= CAST($6 AS BIGINT) THEN CAST(x.gpu_us AS DECIMAL(38, 0)) * COALESCE(p.price_per_hour, CAST(0 AS DECIMAL(18, 6))) END) AS idle_cost_us,
    -- The band at the grid's resolution: counted runs within a step of $6, and runs a step
    -- short of it (a step: the run's mean, secs / steps, compared in integers).
    SUM(CASE WHEN x.secs >= CAST($6 AS BIGINT) AND x.secs * x.steps < CAST($6 AS BIGINT) * x.steps + x.secs THEN x.gpu_us ELSE 0 END) AS edge_in_gpu_us,
    SUM(CASE WHEN x.secs < CAST($6 AS BIGINT) AND x.secs * x.steps + x.secs >= CAST($6 AS BIGINT) * x.steps THEN x.gpu_us ELSE 0 END) AS edge_out_gpu_us
  FROM runs x
  LEFT JOIN gpu_prices p ON p.model = CAST(x.gpu_model AS VARCHAR) AND p.mig_profile IS NULL AND x.start >= p.effective_from AND x.start < p.effective_to
  GROUP BY x.namespace, x.pod, x.gpu_model
),
held AS (
  SELECT
    r.namespace, r.pod, r.gpu_model,
    SUM(r.gpu_us)                                                 AS held_gpu_us,
    COUNT(*)                                                      AS steps,
    SUM(CAST(r.idle AS BIGINT))                                   AS idle_steps,
    SUM(CASE WHEN r.idle = 1 AND r.prev_idle = 0 THEN 1 ELSE 0 END) AS drops
  FROM r
  GROUP BY r.namespace, r.pod, r.gpu_model
)
SELECT
  CAST(h.namespace AS VARCHAR) AS namespace, CAST(h.pod AS VARCHAR) AS pod, CAST(h.gpu_model AS VARCHAR) AS gpu_model, h.held_gpu_us, h.steps, h.idle_steps, h.drops,
  COALESCE(i.idle_gpu_us, 0)                                       AS idle_gpu_us,
  COALESCE(i.idle_runs, 0)                                         AS idle_runs,
  COALESCE(i.idle_cost_us, CAST(0 AS DECIMAL(38, 6)))               AS idle_cost_us,
  COALESCE(i.edge_in_gpu_us, 0)                                    AS edge_in_gpu_us,
  COALESCE(i.edge_out_gpu_us, 0)                                   AS edge_out_gpu_us
FROM held h
LEFT JOIN idle i ON i.namespace = h.namespace AND i.pod = h.pod AND i.gpu_model = h.gpu_model
ORDER BY 1, 2, 3
