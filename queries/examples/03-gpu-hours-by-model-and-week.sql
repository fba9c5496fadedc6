-- How many GPU-hours of each model were held each week, and how many sat unallocated?
-- gpuledger query -f queries/examples/03-gpu-hours-by-model-and-week.sql --param month=2026-10
SELECT
  date_trunc('week', ts)                                                          AS week,
  gpu_model,
  ROUND(SUM(CASE WHEN namespace <> '__unallocated__' THEN gpu_hours ELSE 0 END), 4) AS allocated_gpu_hours,
  ROUND(SUM(CASE WHEN namespace = '__unallocated__' THEN gpu_hours ELSE 0 END), 4)  AS unallocated_gpu_hours,
  ROUND(SUM(gpu_hours), 4)                                                        AS gpu_hours
FROM usage
WHERE month = $month
GROUP BY 1, 2
ORDER BY 1, 2
