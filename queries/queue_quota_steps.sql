-- The quota review against the schedulers' own split (src/report/queue_quota.rs): each
-- scheduler queue's quota and use at each step of the window [$1, $2), in GPUs, summed over its
-- flavors and GPU resources (`queue_quotas`: Kueue ClusterQueues' nominal quota, borrowing limit,
-- admitted usage and pending demand; Volcano's deserved, capability and allocated; KAI's deserved
-- and allocated). A sum of nulls is null: a queue with no borrowing limit has none.
--   $1, $2  window (TIMESTAMP, UTC); $3, $4 first and last `date` partition
SELECT
  COALESCE(CAST(q.cluster AS VARCHAR), 'default') AS cluster,
  CAST(q.scheduler AS VARCHAR)                    AS scheduler,
  CAST(q.queue AS VARCHAR)                        AS queue,
  MAX(CAST(q.cohort AS VARCHAR))                  AS cohort,
  q.ts                                            AS ts,
  SUM(q.nominal)                                  AS nominal,
  SUM(q.borrowing_limit)                          AS borrowing_limit,
  SUM(q.capacity)                                 AS capacity,
  SUM(q.allocated)                                AS allocated,
  SUM(q.pending)                                  AS pending
FROM queue_quotas q
WHERE q.date >= $3 AND q.date <= $4
  AND q.ts >= $1 AND q.ts < $2
GROUP BY 1, 2, 3, 5
ORDER BY 1, 2, 3, 5
