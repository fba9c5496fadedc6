-- Each GPU pod's value of one per-pod `--by` key, for the chargeback's rows by that key
-- (src/report/chargeback/attribution.rs): one row per cluster, namespace and pod name with a
-- value (and, by workload, how its workload was inferred where it was); a pod with none has
-- no row (its GPU time is `__unattributed__`).
--   $4  the window's last `date` partition (pods are partitioned by creation day: every
--       partition up to it is read); $5 the key: workload, label, annotation, queue,
--       cluster_queue or cohort; $6 the label or annotation key as kube-state-metrics names it
--       (`app_kubernetes_io_part_of`), '' for the others
-- A pod name used again (a StatefulSet's pods) takes the value of its latest pod.
-- `queue` is the Kueue LocalQueue (pod label `kueue.x-k8s.io/local-queue-name`), else the
-- Volcano queue (label `volcano.sh/queue-name`, else annotation
-- `scheduling.volcano.sh/queue-name`), else the KAI queue (label `kai.scheduler/queue`);
-- `cohort` is the cohort `queue_quotas` gives the pod's ClusterQueue in the window.
WITH labels AS (
  SELECT
    COALESCE(CAST(l.cluster AS VARCHAR), 'default') AS cluster,
    CAST(l.namespace AS VARCHAR)                    AS namespace,
    l.pod, l.created,
    CAST(l.source AS VARCHAR)                       AS source,
    CAST(l.key AS VARCHAR)                          AS key,
    CAST(l.value AS VARCHAR)                        AS value
  FROM pod_labels l
  WHERE l.date <= $4
),
candidates AS (
  SELECT
    COALESCE(CAST(o.cluster AS VARCHAR), 'default') AS cluster, CAST(o.namespace AS VARCHAR) AS namespace, o.pod, o.created,
    concat(CAST(o.workload_kind AS VARCHAR), '/', CAST(o.workload_name AS VARCHAR)) AS value, 0 AS rank,
    CAST(o.inferred AS VARCHAR) AS inferred
  FROM pod_owners o
  WHERE $5 = 'workload' AND o.date <= $4
  UNION ALL
  SELECT l.cluster, l.namespace, l.pod, l.created, l.value,
    CASE
      WHEN $5 IN ('label', 'annotation') THEN 0
      WHEN l.source = 'label' AND l.key = 'kueue_x_k8s_io_local_queue_name' THEN 1
      WHEN l.source = 'label' AND l.key = 'volcano_sh_queue_name' THEN 2
      WHEN l.source = 'annotation' AND l.key = 'scheduling_volcano_sh_queue_name' THEN 3
      ELSE 4
    END AS rank,
    CAST(NULL AS VARCHAR) AS inferred
  FROM labels l
  WHERE ($5 IN ('label', 'annotation') AND l.source = $5 AND l.key = $6)
     OR ($5 = 'queue' AND ((l.source = 'label' AND l.key IN ('kueue_x_k8s_io_local_queue_name', 'volcano_sh_queue_name', 'kai_scheduler_queue'))
                        OR (l.source = 'annotation' AND l.key = 'scheduling_volcano_sh_queue_name')))
     OR ($5 IN ('cluster_queue', 'cohort') AND l.source = 'label' AND l.key = 'kueue_x_k8s_io_cluster_queue_name')
),
chosen AS (
  SELECT c.cluster, c.namespace, c.pod, c.value, c.inferred,
         ROW_NUMBER() OVER (PARTITION BY c.cluster, c.namespace, c.pod ORDER BY c.created DESC, c.rank, c.value) AS nth
  FROM candidates c
  WHERE c.value <> ''
),
cohorts AS (
  SELECT COALESCE(CAST(q.cluster AS VARCHAR), 'default') AS cluster, CAST(q.queue AS VARCHAR) AS queue, MAX(CAST(q.cohort AS VARCHAR)) AS cohort
  FROM queue_quotas q
  WHERE $5 = 'cohort' AND q.date >= $3 AND q.date <= $4 AND q.ts >= $1 AND q.ts < $2
    AND CAST(q.scheduler AS VARCHAR) = 'kueue' AND q.cohort IS NOT NULL
  GROUP BY 1, 2
)
SELECT c.cluster, c.namespace, c.pod,
       CASE WHEN $5 = 'cohort' THEN k.cohort ELSE c.value END AS value,
       c.inferred
FROM chosen c
LEFT JOIN cohorts k ON k.cluster = c.cluster AND k.queue = c.value
WHERE c.nth = 1
  AND (CASE WHEN $5 = 'cohort' THEN k.cohort ELSE c.value END) IS NOT NULL
ORDER BY 1, 2, 3
