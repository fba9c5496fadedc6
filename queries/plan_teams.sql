-- Each namespace's team, for team quotas in plan scenarios: the `teams` view (config [teams],
-- else the namespace's latest labels; where both name one, the config's row wins in Rust).
SELECT t.namespace AS namespace, t.team AS team, t.source AS source
FROM teams t
WHERE t.team IS NOT NULL
ORDER BY 1, 3
