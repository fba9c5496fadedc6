-- One row per GPU (or MIG slice) per step, with its team and what it cost.
--   ts: start of the step the row stands for, [ts, ts + step_s) (UTC)
--   date: the day partition (YYYY-MM-DD, UTC); filter on it to read fewer files
--   month: YYYY-MM of the row (UTC); filtering on it reads only that month's files
--   node: Kubernetes node name
--   gpu_uuid: the physical GPU
--   gpu_model: DCGM modelName, e.g. NVIDIA H100 80GB HBM3
--   mig_profile: MIG profile of the slice (e.g. 3g.40gb), NULL for a whole GPU
--   namespace: namespace of the pod holding the GPU, __unallocated__ when none did
--   pod: the pod holding the GPU, NULL when none did
--   team: team of the namespace (config [teams], else its namespace label), NULL when unknown
--   share: the fraction of the GPU this row is (1, a MIG slice's share, 1/n time-sliced)
--   gpu_hours: GPU-hours this row stands for (share x step)
--   util_pct: GPU utilisation in percent (0-100)
--   mem_used_mib: framebuffer used, MiB
--   power_w: power draw, W
--   energy_kwh: energy over the step, kWh (the slice's share)
--   cloud_cost: GPU cost: gpu_hours x the GPU model's price per hour on that date (a MIG slice with its own profile price: instance-hours x that price)
--   power_cost: energy_kwh x PUE x the tariff's price per kWh in the 15 minutes the row starts in
--   tariff_band: the tariff band (or "flat") that priced the row's energy
--   carbon_kg: energy_kwh x PUE x grid carbon intensity, NULL when none is configured
SELECT
  s.ts,
  s.date,
  concat(split_part(s.date, '-', 1), '-', split_part(s.date, '-', 2))                                           AS month,
  CAST(s.node AS VARCHAR)                                          AS node,
  CAST(s.gpu_uuid AS VARCHAR)                                      AS gpu_uuid,
  CAST(s.gpu_model AS VARCHAR)                                     AS gpu_model,
  CAST(s.mig_profile AS VARCHAR)                                   AS mig_profile,
  COALESCE(CAST(s.namespace AS VARCHAR), '__unallocated__')       AS namespace,
  CAST(s.pod AS VARCHAR)                                           AS pod,
  t.team                                                           AS team,
  s.share,
  s.share * s.step_s / 3600.0                                      AS gpu_hours,
  s.util_pct,
  s.mem_used_mib,
  s.power_w,
  COALESCE(s.energy_j, 0) / 3600000.0                              AS energy_kwh,
  CAST(CAST(CAST(ROUND(s.share / COALESCE(r.unit_share, 1.0) * s.step_s * 1000000) AS BIGINT) AS DECIMAL(38, 0))
       * COALESCE(r.price_per_hour, CAST(0 AS DECIMAL(18, 6)))
       / CAST(3600000000 AS DECIMAL(38, 0)) AS DECIMAL(30, 12))     AS cloud_cost,
  CAST(CAST(ROUND(COALESCE(s.energy_j, 0) * 1000) AS DECIMAL(38, 0)) * p.pue * p.price_per_kwh
       / CAST(3600000000 AS DECIMAL(38, 0)) AS DECIMAL(30, 12))     AS power_cost,
  p.band                                                           AS tariff_band,
  CAST(COALESCE(s.energy_j, 0) / 3600000.0 * CAST(p.pue AS DOUBLE) * CAST(p.carbon_g_per_kwh AS DOUBLE) / 1000.0 AS DOUBLE) AS carbon_kg
FROM gpu_samples s
LEFT JOIN teams t ON t.namespace = CAST(s.namespace AS VARCHAR)
-- The one resolved price of the row (src/pricing/tables.rs, `gpu_rates`): its MIG profile's
-- own price per instance-hour (time / unit_share), else the whole-GPU price.
LEFT JOIN gpu_rates r
  ON CAST(s.gpu_model AS VARCHAR) = r.model
 AND s.ts >= r.effective_from AND s.ts < r.effective_to
 AND (CAST(s.mig_profile AS VARCHAR) = r.mig_profile
      OR (r.mig_profile IS NULL AND strpos(r.own_price_profiles, concat(',', CAST(s.mig_profile AS VARCHAR), ',')) = 0))
LEFT JOIN power_tariff p
  ON date_bin(INTERVAL '15 minutes', s.ts) = p.bucket_start
