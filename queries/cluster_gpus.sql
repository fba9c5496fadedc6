-- The GPUs (and MIG instances' parent GPUs) seen in the window [$1, $2), from the small
-- inventory table (a distinct count over every GPU row costs as much as the rest of the
-- chargeback at a month of 1,024 GPUs). A GPU is its cluster and UUID.
--   $1, $2  window start and end (TIMESTAMP, UTC); $3, $4  first and last `date` partition
SELECT COUNT(DISTINCT concat(COALESCE(CAST(n.cluster AS VARCHAR), 'default'), '/', CAST(n.gpu_uuid AS VARCHAR))) AS gpus
FROM nodes n
WHERE n.date >= $3 AND n.date <= $4 AND n.first_seen < $2 AND n.last_seen >= $1
