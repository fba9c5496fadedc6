-- Gaps (windows in which a source returned no data) overlapping [$1, $2), clipped to it.
--   $1, $2  window start and end (TIMESTAMP, UTC), half-open
SELECT
  CAST(g.source AS VARCHAR)                                   AS source,
  CAST(g.metric AS VARCHAR)                                   AS metric,
  CASE WHEN g.gap_start < $1 THEN $1 ELSE g.gap_start END     AS gap_start,
  CASE WHEN g.gap_end > $2 THEN $2 ELSE g.gap_end END         AS gap_end,
  CAST(g.reason AS VARCHAR)                                   AS reason
FROM gaps g
WHERE g.gap_end > $1 AND g.gap_start < $2
ORDER BY source, metric, gap_start
