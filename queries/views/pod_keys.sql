-- Each pod's workload and queues as `--by` resolves them: join any table on namespace and pod (and COALESCE(cluster, 'default') where the lake has several clusters) to group by them.
-- One row per cluster, namespace and pod name; a name used again (a StatefulSet's pods) takes
-- its latest pod's values, as the reports do.
--   cluster: the pod's cluster ('default' where the lake has none)
--   namespace: the pod's namespace
--   pod: the pod's name
--   workload: its top-level workload as Kind/name from pod_owners (Deployment/api, RayJob/train-7, Pod/debug-1); NULL where no owner was collected
--   workload_inferred: how a hop to the workload was inferred (a label, a name convention); NULL where every hop came from owner series
--   queue: the Kueue LocalQueue, else the Volcano queue (label, else annotation), else the KAI queue; NULL where none
--   cluster_queue: the Kueue ClusterQueue (pod label kueue.x-k8s.io/cluster-queue-name); NULL where none
WITH pods_named AS (
  SELECT DISTINCT COALESCE(CAST(p.cluster AS VARCHAR), 'default') AS cluster, CAST(p.namespace AS VARCHAR) AS namespace, p.pod
  FROM pods p
),
owners AS (
  SELECT
    COALESCE(CAST(o.cluster AS VARCHAR), 'default') AS cluster, CAST(o.namespace AS VARCHAR) AS namespace, o.pod,
    concat(CAST(o.workload_kind AS VARCHAR), '/', CAST(o.workload_name AS VARCHAR)) AS workload,
    CAST(o.inferred AS VARCHAR) AS workload_inferred,
    ROW_NUMBER() OVER (PARTITION BY COALESCE(CAST(o.cluster AS VARCHAR), 'default'), CAST(o.namespace AS VARCHAR), o.pod ORDER BY o.created DESC) AS nth
  FROM pod_owners o
),
queue_labels AS (
  SELECT
    COALESCE(CAST(l.cluster AS VARCHAR), 'default') AS cluster, CAST(l.namespace AS VARCHAR) AS namespace, l.pod, l.created,
    CAST(l.source AS VARCHAR) AS source, CAST(l.key AS VARCHAR) AS key, CAST(l.value AS VARCHAR) AS value
  FROM pod_labels l
  WHERE CAST(l.value AS VARCHAR) <> ''
    AND ((CAST(l.source AS VARCHAR) = 'label'
          AND CAST(l.key AS VARCHAR) IN ('kueue_x_k8s_io_local_queue_name', 'volcano_sh_queue_name', 'kai_scheduler_queue', 'kueue_x_k8s_io_cluster_queue_name'))
      OR (CAST(l.source AS VARCHAR) = 'annotation' AND CAST(l.key AS VARCHAR) = 'scheduling_volcano_sh_queue_name'))
),
queues AS (
  SELECT q.cluster, q.namespace, q.pod, q.value,
    ROW_NUMBER() OVER (
      PARTITION BY q.cluster, q.namespace, q.pod
      ORDER BY q.created DESC,
        CASE
          WHEN q.source = 'label' AND q.key = 'kueue_x_k8s_io_local_queue_name' THEN 1
          WHEN q.source = 'label' AND q.key = 'volcano_sh_queue_name' THEN 2
          WHEN q.source = 'annotation' THEN 3
          ELSE 4
        END,
        q.value) AS nth
  FROM queue_labels q
  WHERE q.key <> 'kueue_x_k8s_io_cluster_queue_name'
),
cluster_queues AS (
  SELECT q.cluster, q.namespace, q.pod, q.value,
    ROW_NUMBER() OVER (PARTITION BY q.cluster, q.namespace, q.pod ORDER BY q.created DESC, q.value) AS nth
  FROM queue_labels q
  WHERE q.key = 'kueue_x_k8s_io_cluster_queue_name'
)
SELECT p.cluster, p.namespace, p.pod, o.workload, o.workload_inferred, q.value AS queue, c.value AS cluster_queue
FROM pods_named p
LEFT JOIN owners o ON o.cluster = p.cluster AND o.namespace = p.namespace AND o.pod = p.pod AND o.nth = 1
LEFT JOIN queues q ON q.cluster = p.cluster AND q.namespace = p.namespace AND q.pod = p.pod AND q.nth = 1
LEFT JOIN cluster_queues c ON c.cluster = p.cluster AND c.namespace = p.namespace AND c.pod = p.pod AND c.nth = 1
