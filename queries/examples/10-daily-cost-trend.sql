-- How do each team's GPU-hours, utilisation and cost move day by day?
-- gpuledger query -f queries/examples/10-daily-cost-trend.sql --param month=2026-10
SELECT
  date,
  COALESCE(team, namespace)                                         AS team,
  ROUND(SUM(gpu_hours), 4)                                          AS gpu_hours,
  ROUND(SUM(avg_util_pct * gpu_hours) / NULLIF(SUM(gpu_hours), 0), 2) AS avg_util_pct,
  CAST(SUM(cloud_cost) AS DECIMAL(20, 2))                           AS cloud_cost
FROM daily_usage
WHERE month = $month
GROUP BY date, COALESCE(team, namespace)
ORDER BY date, team
