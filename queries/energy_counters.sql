-- Energy against the GPUs' own counters over the window's whole days: per day and physical
-- GPU, the energy of its `gpu_samples` rows, the part on the steps its energy counter covers,
-- and the counter's own delta over those steps, as the day's `nodes` rows carry them (on the
-- GPU's first row; filled from `gpu_samples.counter_j`: src/lake/gpu_energy.rs). All three
-- are null on days collected before the counters were kept.
--   $1, $2  first and last whole day of the window (`date` partitions)
SELECT
  CAST(n.date AS VARCHAR)                  AS date,
  CASE WHEN n.cluster IS NULL OR CAST(n.cluster AS VARCHAR) = 'default' THEN CAST(n.node AS VARCHAR)
       ELSE concat(CAST(n.cluster AS VARCHAR), '/', CAST(n.node AS VARCHAR)) END AS node,
  CAST(n.gpu_uuid AS VARCHAR)              AS gpu_uuid,
  SUM(n.rows_energy_j)                     AS rows_energy_j,
  SUM(n.counter_energy_j)                  AS counter_energy_j,
  SUM(n.counter_delta_j)                   AS counter_delta_j
FROM nodes n
WHERE n.date >= $1 AND n.date <= $2
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
