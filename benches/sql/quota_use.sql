-- The per-row form of queries/quota_use.sql, over every gpu_samples row (the tests' oracle,
-- and DuckDB's side of the benchmark); gpuledger folds the same per bucket first.
-- Whole GPUs in use per namespace over [$1, $2), as a histogram: for each count of GPUs held
-- at once, the seconds the namespace held that many. MIG slices are other resources than
-- nvidia.com/gpu and do not count against its quota. GPUs at a step are the namespace's shares
-- summed and rounded up: a step split between two of its pods (one left, the next arrived) is
-- one GPU, not two.
--   $1, $2  window (TIMESTAMP, UTC); $3, $4 first and last `date` partition
WITH per_step AS (
  SELECT g.namespace AS namespace, g.ts AS ts, CAST(CEIL(SUM(g.share) - 0.000001) AS BIGINT) AS gpus, MIN(g.step_s) AS step_s
  FROM gpu_samples g
  WHERE g.date >= $3 AND g.date <= $4
    AND g.ts >= $1 AND g.ts < $2
    AND g.namespace IS NOT NULL
    AND g.namespace <> '__unmeasured__'
    AND g.mig_profile IS NULL
  GROUP BY g.namespace, g.ts
)
SELECT CAST(namespace AS VARCHAR) AS namespace, gpus, SUM(CAST(step_s AS BIGINT)) AS seconds
FROM per_step
GROUP BY 1, 2
ORDER BY 1, 2
