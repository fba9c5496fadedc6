-- Which ten pods wasted the most GPU time idling (under 5% utilisation), and what did it cost?
-- gpuledger query -f queries/examples/02-most-idle-pods.sql --param month=2026-10
SELECT
  namespace,
  pod,
  ROUND(SUM(CASE WHEN COALESCE(util_pct, 0) < 5 THEN gpu_hours ELSE 0 END), 4)  AS idle_gpu_hours,
  ROUND(SUM(gpu_hours), 4)                                                       AS gpu_hours,
  CAST(SUM(CASE WHEN COALESCE(util_pct, 0) < 5 THEN cloud_cost ELSE 0 END) AS DECIMAL(20, 2)) AS idle_cloud_cost
FROM usage
WHERE month = $month AND pod IS NOT NULL
GROUP BY namespace, pod
ORDER BY idle_gpu_hours DESC, namespace, pod
LIMIT 10
