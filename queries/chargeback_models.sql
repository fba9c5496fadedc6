-- Chargeback per namespace and GPU model (and MIG profile) for the window [$1, $2): GPU time
-- as integer GPU-microseconds and cloud cost as DECIMAL, the detail under the chargeback's rows.
--   $1, $2  window start and end (TIMESTAMP, UTC), half-open; $3, $4 `date` partitions
WITH samples AS (
  SELECT
    COALESCE(CAST(s.namespace AS VARCHAR), '__unallocated__')              AS namespace,
    CAST(s.gpu_model AS VARCHAR)                                            AS gpu_model,
    COALESCE(CAST(s.mig_profile AS VARCHAR), '')                            AS mig_profile,
    s.ts                                                                    AS ts,
    CAST(ROUND(s.share * s.step_s * 1000000) AS BIGINT)                     AS gpu_us
  FROM gpu_samples s
  WHERE s.date >= $3 AND s.date <= $4
    AND s.ts >= $1 AND s.ts < $2
)
SELECT
  x.namespace,
  x.gpu_model,
  x.mig_profile,
  SUM(x.gpu_us)                                                                                        AS gpu_us,
  SUM(CAST(x.gpu_us AS DECIMAL(38, 0)) * COALESCE(g.price_per_hour, CAST(0 AS DECIMAL(18, 6))))         AS cloud_cost_us
FROM samples x
LEFT JOIN gpu_prices g
  ON x.gpu_model = g.model AND x.ts >= g.effective_from AND x.ts < g.effective_to
GROUP BY x.namespace, x.gpu_model, x.mig_profile
ORDER BY x.namespace, x.gpu_model, x.mig_profile
