-- Each scheduler queue's pods created in [$1, $2) that were bound to a node, with their wait
-- (scheduled - created, ms), for the quota review's waits per queue (src/report/queue_quota.rs).
-- A pod's queue is its label as kube-state-metrics exports it: Kueue's
-- `kueue.x-k8s.io/cluster-queue-name` (the ClusterQueue), Volcano's `volcano.sh/queue-name`,
-- KAI's `kai.scheduler/queue` (`pod_labels`, partitioned by creation day as `pods` is).
--   $1, $2  window (TIMESTAMP, UTC); $3, $4 first and last `date` partition
SELECT
  COALESCE(CAST(p.cluster AS VARCHAR), 'default')           AS cluster,
  CASE CAST(l.key AS VARCHAR)
    WHEN 'kueue_x_k8s_io_cluster_queue_name' THEN 'kueue'
    WHEN 'volcano_sh_queue_name' THEN 'volcano'
    ELSE 'kai'
  END                                                       AS scheduler,
  CAST(l.value AS VARCHAR)                                  AS queue,
  CAST(p.scheduled AS BIGINT) - CAST(p.created AS BIGINT)   AS wait_ms
FROM pods p
JOIN pod_labels l ON l.uid = p.uid AND l.date = p.date
WHERE p.date >= $3 AND p.date <= $4
  AND p.created >= $1 AND p.created < $2
  AND p.scheduled IS NOT NULL
  AND CAST(l.source AS VARCHAR) = 'label'
  AND CAST(l.key AS VARCHAR) IN ('kueue_x_k8s_io_cluster_queue_name', 'volcano_sh_queue_name', 'kai_scheduler_queue')
ORDER BY 1, 2, 3, 4
