-- One row per day, namespace and GPU model: the usage view summed by day.
--   date: the day (YYYY-MM-DD, UTC)
--   month: YYYY-MM of the day
--   namespace: namespace, __unallocated__ for GPU time no pod held
--   team: team of the namespace, NULL when unmapped
--   gpu_model: DCGM modelName
--   gpu_hours: GPU-hours held (MIG slices and time-sliced GPUs at their share)
--   avg_util_pct: GPU-time-weighted average utilisation, percent
--   energy_kwh: energy, kWh
--   cloud_cost: GPU-hours x price per GPU-hour
--   power_cost: kWh x PUE x price per kWh
SELECT
  u.date,
  u.month,
  u.namespace,
  u.team,
  u.gpu_model,
  SUM(u.gpu_hours)                                                 AS gpu_hours,
  SUM(COALESCE(u.util_pct, 0) * u.gpu_hours) / NULLIF(SUM(u.gpu_hours), 0) AS avg_util_pct,
  SUM(u.energy_kwh)                                                AS energy_kwh,
  SUM(u.cloud_cost)                                                AS cloud_cost,
  SUM(u.power_cost)                                                AS power_cost
FROM usage u
GROUP BY u.date, u.month, u.namespace, u.team, u.gpu_model
