-- Is the pool busier in working hours (08:00-20:00 UTC, Monday-Friday) than at night and at weekends?
-- gpuledger query -f queries/examples/04-night-vs-day.sql --param month=2026-10
SELECT
  CASE WHEN date_part('hour', ts) BETWEEN 8 AND 19 AND date_part('dow', ts) BETWEEN 1 AND 5
       THEN 'working hours' ELSE 'nights and weekends' END                      AS period,
  ROUND(SUM(CASE WHEN namespace <> '__unallocated__' THEN gpu_hours ELSE 0 END), 4) AS allocated_gpu_hours,
  ROUND(SUM(gpu_hours), 4)                                                      AS gpu_hours,
  ROUND(100 * SUM(CASE WHEN namespace <> '__unallocated__' THEN gpu_hours ELSE 0 END) / SUM(gpu_hours), 2) AS allocation_pct,
  ROUND(SUM(COALESCE(util_pct, 0) * gpu_hours) / SUM(gpu_hours), 2)              AS avg_util_pct
FROM usage
WHERE month = $month
GROUP BY 1
ORDER BY 1
