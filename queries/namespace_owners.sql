-- Team and cost centre of every namespace the config or a namespace label names.
SELECT namespace, team, cost_centre FROM teams ORDER BY namespace
