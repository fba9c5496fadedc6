-- DuckDB's side of the chargeback's first step when the lake has its rollups: the stored
-- 15-minute sums (`<lake>/_rollups/gpu_buckets/date=*/`, read as `gpu_buckets_rollup`) of the
-- window [$1, $2), days $3 to $4. gpuledger reads the same files (src/lake/rollup.rs) for
-- every day whose rollup matches its samples and whose part of the window starts and ends on
-- bucket edges.
SELECT cluster, namespace, node, gpu_model, mig_profile, bucket, day, share, step_s, n, energy_mj, util_gpu_us, util_n
FROM gpu_buckets_rollup
WHERE date >= $3 AND date <= $4
  AND bucket >= $1 AND bucket < $2
