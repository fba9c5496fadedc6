-- Per namespace over [$1, $2): the GPU ResourceQuota (largest hard limit seen) and the
-- pending demand for whole GPUs in GPU-seconds (the per-row form is benches/sql/quota_limits.sql).
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
  -- From `pending_buckets` (pending_samples summed per 15-minute bucket, the lake's rollups or
  -- the window's rows): gpu_us is SUM(gpu_request x step_s x 1e6), a HAMi pod's vGPUs each
  -- its gpu_share_pct of a GPU (rounded per row to the microsecond).
  SELECT CAST(p.namespace AS VARCHAR) AS namespace, SUM(p.gpu_us) / 1000000 AS pending_gpu_s
  FROM pending_buckets p
  WHERE COALESCE(CAST(p.gpu_resource AS VARCHAR), 'nvidia.com/gpu') = 'nvidia.com/gpu'
  GROUP BY 1
)
SELECT COALESCE(h.namespace, p.namespace) AS namespace, CAST(h.hard AS BIGINT) AS hard, COALESCE(p.pending_gpu_s, 0) AS pending_gpu_s
FROM hard h
FULL OUTER JOIN pending p ON p.namespace = h.namespace
ORDER BY 1
