-- What did team X cost last month, and on which GPU models?
-- gpuledger query -f queries/examples/01-team-cost.sql --param month=2026-10 --param team=foundation-models
SELECT
  team,
  gpu_model,
  ROUND(SUM(gpu_hours), 4)                        AS gpu_hours,
  ROUND(SUM(energy_kwh), 4)                       AS energy_kwh,
  CAST(SUM(cloud_cost) AS DECIMAL(20, 2))         AS cloud_cost,
  CAST(SUM(power_cost) AS DECIMAL(20, 2))         AS power_cost
FROM usage
WHERE month = $month AND team = $team
GROUP BY team, gpu_model
ORDER BY cloud_cost DESC
