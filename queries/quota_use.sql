-- Whole GPUs in use per namespace over the window, as a histogram: for each count of GPUs held
-- at once, the seconds the namespace held that many. MIG slices are other resources than
-- nvidia.com/gpu and do not count against its quota. GPUs at a step are the namespace's shares
-- summed and rounded up: a step split between two of its pods (one left, the next arrived) is
-- one GPU, not two.
-- Reads `namespace_gpus`: per cluster, namespace and 15-minute bucket, the seconds at each
-- count, folded per step from the window's gpu_samples rows (the lake's rollups or the rows
-- themselves, src/lake/day_sums.rs); the per-row form is benches/sql/quota_use.sql.
SELECT CAST(h.namespace AS VARCHAR) AS namespace, h.gpus AS gpus, SUM(h.seconds) AS seconds
FROM namespace_gpus h
GROUP BY 1, 2
ORDER BY 1, 2
