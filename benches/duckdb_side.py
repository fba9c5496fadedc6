#!/usr/bin/env python3
"""The DuckDB side of the benchmark: gpuledger's own rollup SQL (queries/*.sql) run by DuckDB on
the same Parquet lake, with the same parameters (for the idle report's per-pod runs, which
gpuledger finds in a streaming pass, the plain-SQL form in benches/sql/). The two dialects differ in two places only,
rewritten here: DataFusion's date_bin is DuckDB's time_bucket, and CAST(<timestamp> AS BIGINT)
(milliseconds in DataFusion) is epoch_ms(<timestamp>) in DuckDB.

Usage: duckdb_side.py --lake LAKE --tables DIR --queries DIR --from T --to T [--repeat N] [--threads N]
                      [--buckets-from rollups|samples]
Prints one JSON object: {"<query>": {"secs": [...], "rows": N}, ...} plus "peak_rss_kib".
"""
import argparse
import datetime as dt
import json
import os
import re
import resource
import sys
import time

import duckdb

# Where gpuledger answers a question outside SQL (the idle report finds idle runs in one
# streaming pass, then prices them in queries/idle_pods.sql), DuckDB gets the plain-SQL form.
# Likewise the chargeback's first step (gpuledger: a pass summing rows per 15-minute bucket).
BENCH_SQL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sql")
# And the reports gpuledger answers from its rollups' tables (pending_buckets,
# unallocated_units): DuckDB runs the per-row SQL they replaced, over the samples.
PEER_SQL = {
    "idle_pods": os.path.join(BENCH_SQL, "idle_pods_windowed.sql"),
    "gpu_buckets": os.path.join(BENCH_SQL, "gpu_buckets.sql"),
    "queue_pending": os.path.join(BENCH_SQL, "queue_pending.sql"),
    "idle_unallocated": os.path.join(BENCH_SQL, "idle_unallocated.sql"),
    "idle_zombie": os.path.join(BENCH_SQL, "idle_zombie.sql"),
}
# Steps whose result the next step reads as a table.
TEMP_TABLES = {"gpu_buckets", "chargeback_grain", "pod_run_days"}

TS_COLUMNS = {"ts", "created", "scheduled", "started", "finished", "run_from", "run_to", "start"}


def matching(sql, open_idx):
    depth = 0
    for i in range(open_idx, len(sql)):
        if sql[i] == "(":
            depth += 1
        elif sql[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced parentheses")


def to_duckdb(sql):
    sql = re.sub(r"--[^\n]*", "", sql)
    sql = sql.replace("date_bin(", "time_bucket(")
    out, i = [], 0
    while True:
        j = sql.find("CAST(", i)
        if j < 0:
            out.append(sql[i:])
            break
        k = matching(sql, j + 4)
        inner = sql[j + 5 : k]
        m = re.fullmatch(r"\s*(.*?)\s+AS\s+BIGINT\s*", inner, re.S)
        expr = m.group(1) if m else None
        is_ts = expr is not None and (
            expr.startswith("least(") or expr.startswith("greatest(") or expr.split(".")[-1] in TS_COLUMNS
        )
        if is_ts:
            out.append(sql[i:j] + "epoch_ms(" + to_duckdb(expr) + ")")
        else:
            out.append(sql[i : j + 5] + to_duckdb(inner) + ")")
        i = k + 1
    return "".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", required=True)
    ap.add_argument("--tables", required=True, help="folder of the config tables as Parquet")
    ap.add_argument("--queries", required=True)
    ap.add_argument("--from", dest="start", required=True)
    ap.add_argument("--to", dest="end", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--only", default="")
    ap.add_argument("--buckets-from", choices=["rollups", "samples"], default="rollups",
                    help="the chargeback's 15-minute sums: the lake's stored rollups, or a GROUP BY over every sample")
    a = ap.parse_args()

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    if a.threads:
        con.execute(f"SET threads = {a.threads}")
    for t in sorted(os.listdir(a.lake)):
        if t.startswith("_") or not os.path.isdir(os.path.join(a.lake, t)):
            continue
        con.execute(
            f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{a.lake}/{t}/*/*.parquet', hive_partitioning = true, hive_types = {{'date': VARCHAR}})"
        )
    if a.buckets_from == "rollups":
        con.execute(
            f"CREATE VIEW gpu_buckets_rollup AS SELECT * FROM read_parquet('{a.lake}/_rollups/gpu_buckets/*/*.parquet', hive_partitioning = true, hive_types = {{'date': VARCHAR}})"
        )
        PEER_SQL["gpu_buckets"] = os.path.join(BENCH_SQL, "gpu_buckets_rollup.sql")
    for t in ["gpu_prices", "cpu_prices", "memory_prices", "power_tariff", "calendar", "teams"]:
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{a.tables}/{t}.parquet')")

    start = dt.datetime.fromisoformat(a.start.replace("Z", "+00:00"))
    end = dt.datetime.fromisoformat(a.end.replace("Z", "+00:00"))
    last_day = (end - dt.timedelta(milliseconds=1)).date()
    base = [start, end, start.date().isoformat(), last_day.isoformat(), 5.0, 1800, 1024.0]

    # The rollups, grouped as the reports run them. chargeback's step 2 reads step 1's result.
    rollups = {
        "chargeback": ["gpu_buckets", "chargeback_grain", "cluster_totals", "pod_run_days", "chargeback", "cluster_gpus"],
        "idle": ["idle_pods", "idle_unallocated", "idle_zombie"],
        "queue": ["queue_waits", "queue_pending"],
    }
    out = {}
    for report, names in rollups.items():
        if a.only and report not in a.only.split(","):
            continue
        secs = []
        rows = {}
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            for name in names:
                sql = to_duckdb(open(PEER_SQL.get(name, f"{a.queries}/{name}.sql")).read())
                # DuckDB wants every positional parameter used: renumber the ones the query uses.
                used = sorted({int(x) for x in re.findall(r"\$(\d+)", sql)})
                sql = re.sub(r"\$(\d+)", lambda m: "$" + str(used.index(int(m.group(1))) + 1), sql)
                params = [base[u - 1] for u in used]
                if name in TEMP_TABLES:
                    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS " + sql, params)
                    rows[name] = con.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
                else:
                    rows[name] = len(con.execute(sql, params).fetchall())
            secs.append(time.perf_counter() - t0)
        out[report] = {"secs": secs, "rows": rows}
    out["peak_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out["duckdb"] = duckdb.__version__
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
