-- The per-row form of queries/idle_zombie.sql, over every gpu_samples row (the tests'
-- oracle, and DuckDB's side of the benchmark); gpuledger sums the same per unit and bucket first.
-- Zombie memory over [$1, $2): a GPU (or MIG instance) with no pod, 0 % utilisation and more
-- than $7 MiB of framebuffer used (a process outliving its pod), per GPU.
--   $1, $2  window (TIMESTAMP, UTC); $3, $4 first and last `date` partition
--   $7      framebuffer threshold, MiB (idle.zombie_mem_mib)
SELECT
  g.node_name                                                           AS node,
  CAST(g.gpu_uuid AS VARCHAR)                                             AS gpu_uuid,
  CAST(g.gpu_instance_id AS BIGINT)                                       AS gpu_instance_id,
  CAST(g.gpu_model AS VARCHAR)                                            AS gpu_model,
  CAST(g.mig_profile AS VARCHAR)                                          AS mig_profile,
  COUNT(*)                                                                AS steps,
  SUM(g.gpu_us)                                                           AS gpu_us,
  CAST(MAX(g.mem_used_mib) AS BIGINT)                                     AS max_mem_mib,
  MIN(g.ts)                                                               AS first_seen,
  MAX(g.ts)                                                               AS last_seen
FROM gpu_time g
WHERE g.date >= $3 AND g.date <= $4
  AND g.ts >= $1 AND g.ts < $2
  AND g.namespace IS NULL
  AND COALESCE(g.util_pct, 0) = 0
  AND g.mem_used_mib > CAST($7 AS DOUBLE)
GROUP BY 1, 2, 3, 4, 5
ORDER BY gpu_us DESC, node, gpu_uuid, gpu_instance_id
