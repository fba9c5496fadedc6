-- Team and cost centre of every namespace: config [teams] first, else its latest namespace labels.
-- (The config wins where it names the namespace; labels come from kube_namespace_labels.)
--   namespace: a namespace
--   team: its team, NULL when only a cost centre is known
--   cost_centre: its cost centre, NULL when none is known
--   source: config or label
WITH labelled AS (
  SELECT
    CAST(l.namespace AS VARCHAR)   AS namespace,
    CAST(l.team AS VARCHAR)        AS team,
    CAST(l.cost_centre AS VARCHAR) AS cost_centre,
    ROW_NUMBER() OVER (PARTITION BY CAST(l.namespace AS VARCHAR) ORDER BY l.ts DESC) AS rn
  FROM namespace_labels l
)
SELECT c.namespace, c.team, c.cost_centre, 'config' AS source
FROM teams_config c
UNION ALL
SELECT l.namespace, l.team, l.cost_centre, 'label' AS source
FROM labelled l
WHERE l.rn = 1
  AND l.namespace NOT IN (SELECT namespace FROM teams_config)
