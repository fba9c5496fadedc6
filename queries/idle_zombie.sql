-- Zombie memory over the window: a GPU (or MIG instance) with no pod, 0 % utilisation and more
-- than $7 MiB of framebuffer used (a process outliving its pod), per GPU.
--   $7      framebuffer threshold, MiB (idle.zombie_mem_mib)
-- Reads `unallocated_units` (see idle_unallocated.sql): rows with no or 0 % utilisation are
-- kept apart per framebuffer value, so any threshold selects exactly the rows over it; the
-- per-row form is benches/sql/idle_zombie.sql.
SELECT
  CASE WHEN CAST(z.cluster AS VARCHAR) = 'default' THEN CAST(z.node AS VARCHAR)
       ELSE concat(CAST(z.cluster AS VARCHAR), '/', CAST(z.node AS VARCHAR)) END  AS node,
  CAST(z.gpu_uuid AS VARCHAR)                                             AS gpu_uuid,
  CAST(z.gpu_instance_id AS BIGINT)                                       AS gpu_instance_id,
  CAST(z.gpu_model AS VARCHAR)                                            AS gpu_model,
  CAST(z.mig_profile AS VARCHAR)                                          AS mig_profile,
  SUM(z.n)                                                                AS steps,
  SUM(z.gpu_us)                                                           AS gpu_us,
  CAST(MAX(z.zombie_mem_mib) AS BIGINT)                                   AS max_mem_mib,
  MIN(z.first_ts)                                                         AS first_seen,
  MAX(z.last_ts)                                                          AS last_seen
FROM unallocated_units z
WHERE z.zombie_mem_mib > CAST($7 AS DOUBLE)
GROUP BY 1, 2, 3, 4, 5
ORDER BY gpu_us DESC, node, gpu_uuid, gpu_instance_id
