-- What does a successful job cost in each namespace (cloud cost over completed pods)?
-- gpuledger query -f queries/examples/06-cost-per-successful-job.sql --param month=2026-10
WITH cost AS (
  SELECT namespace, SUM(cloud_cost) AS cloud_cost
  FROM usage
  WHERE month = $month AND namespace <> '__unallocated__'
  GROUP BY namespace
),
jobs AS (
  SELECT namespace, COUNT(*) AS pods, SUM(CASE WHEN succeeded THEN 1 ELSE 0 END) AS succeeded
  FROM pod_runs
  WHERE month = $month
  GROUP BY namespace
)
SELECT
  c.namespace,
  j.pods,
  j.succeeded,
  CAST(c.cloud_cost AS DECIMAL(20, 2))                                              AS cloud_cost,
  CAST(c.cloud_cost / NULLIF(j.succeeded, 0) AS DECIMAL(20, 2))                     AS cost_per_successful_job
FROM cost c
JOIN jobs j ON j.namespace = c.namespace
ORDER BY c.namespace
