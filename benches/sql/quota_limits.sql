-- The per-row form of queries/quota_limits.sql, over every pending_samples row (the tests'
-- oracle, and DuckDB's side of the benchmark); gpuledger sums the same per bucket first.
-- Per namespace over [$1, $2): the GPU ResourceQuota (largest hard limit seen) and the
-- pending demand for whole GPUs in GPU-seconds.
--   $1, $2  window (TIMESTAMP, UTC); $3, $4 first and last `date` partition
WITH hard AS (
  SELECT CAST(q.namespace AS VARCHAR) AS namespace, MAX(q.hard) AS hard
  FROM quotas q
  WHERE q.date >= $3 AND q.date <= $4
    AND q.ts >= $1 AND q.ts < $2
    AND CAST(q.resource AS VARCHAR) LIKE '%nvidia.com/gpu'
  GROUP BY 1
),
pending AS (
  -- A HAMi pod's vGPUs are each its gpu_share_pct of a GPU (rounded per row to the us).
  SELECT CAST(p.namespace AS VARCHAR) AS namespace,
    SUM(CAST(round(CAST(p.gpu_request AS DOUBLE) * CAST(p.step_s AS DOUBLE) * 1000000 * COALESCE(p.gpu_share_pct, 100) / 100) AS BIGINT)) / 1000000 AS pending_gpu_s
  FROM pending_samples p
  WHERE p.date >= $3 AND p.date <= $4
    AND p.ts >= $1 AND p.ts < $2
    AND COALESCE(CAST(p.gpu_resource AS VARCHAR), 'nvidia.com/gpu') = 'nvidia.com/gpu'
  GROUP BY 1
)
SELECT COALESCE(h.namespace, p.namespace) AS namespace, CAST(h.hard AS BIGINT) AS hard, COALESCE(p.pending_gpu_s, 0) AS pending_gpu_s
FROM hard h
FULL OUTER JOIN pending p ON p.namespace = h.namespace
ORDER BY 1
