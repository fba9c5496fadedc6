-- How much energy and power cost does each team use, and at what average power per GPU?
-- gpuledger query -f queries/examples/11-energy-by-team.sql --param month=2026-10
SELECT
  COALESCE(team, namespace)                            AS team,
  ROUND(SUM(energy_kwh), 4)                            AS energy_kwh,
  CAST(SUM(power_cost) AS DECIMAL(20, 2))              AS power_cost,
  ROUND(1000 * SUM(energy_kwh) / NULLIF(SUM(gpu_hours), 0), 1) AS avg_watts_per_gpu
FROM usage
WHERE month = $month
GROUP BY COALESCE(team, namespace)
ORDER BY energy_kwh DESC
