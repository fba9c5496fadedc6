-- What a plan's calibration compares the baseline replay with, besides the pods themselves:
-- per namespace and hour of [$1, $2), the pending GPU demand recorded (GPU-seconds), and the
-- GPU ResourceQuota (largest hard limit seen, whole GPUs) in rows of hour NULL.
--   $3, $4  first and last `date` partition; $5 the cluster ('' for a lake of one)
-- The demand reads `pending_buckets` (pending_samples of the window summed per 15-minute bucket,
-- from the lake's rollups or the rows: gpu_us = SUM(gpu_request x step_s x 1e6), a HAMi pod's
-- vGPUs each its gpu_share_pct of a GPU).
SELECT
  CAST(p.namespace AS VARCHAR)                                   AS namespace,
  CAST(p.bucket AS BIGINT) / 3600000 * 3600000                   AS hour_ms,
  SUM(p.gpu_us) / 1000000                                        AS pending_gpu_s,
  CAST(NULL AS BIGINT)                                           AS hard
FROM pending_buckets p
WHERE ($5 = '' OR CAST(p.cluster AS VARCHAR) = $5)
GROUP BY 1, 2
UNION ALL
SELECT
  CAST(q.namespace AS VARCHAR)  AS namespace,
  CAST(NULL AS BIGINT)          AS hour_ms,
  CAST(NULL AS BIGINT)          AS pending_gpu_s,
  CAST(MAX(q.hard) AS BIGINT)   AS hard
FROM quotas q
WHERE q.date >= $3 AND q.date <= $4
  AND q.ts >= $1 AND q.ts < $2
  AND CAST(q.resource AS VARCHAR) LIKE '%nvidia.com/gpu'
  AND ($5 = '' OR COALESCE(CAST(q.cluster AS VARCHAR), 'default') = $5)
GROUP BY 1
ORDER BY 1, 2
