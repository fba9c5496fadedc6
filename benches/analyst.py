#!/usr/bin/env python3
"""The queries a DuckDB user would write for each of gpuledger's monthly reports, run on the same
lake (read_parquet over the day files, no rollups): plain GROUP BYs and window functions as an
analyst writes them, not rewrites of gpuledger's SQL. Each answers the report's main question
(not every column and rounding rule of it). Times each (best of --repeat, after one warm-up
run unless --cold) and prints JSON: {"<report>": {"secs": s, "rows": n, "peak_rss_mib": m}}.

  python benches/analyst.py --lake LAKE --from 2026-09-01T00:00:00Z --to 2026-10-01T00:00:00Z
"""

import argparse
import json
import resource
import time

import duckdb


def queries(lake, start, end, zombie_mib=1024.0, idle_pct=5.0, idle_secs=1800):
    gpu = f"read_parquet('{lake}/gpu_samples/*/*.parquet', hive_partitioning = false)"
    pending = f"read_parquet('{lake}/pending_samples/*/*.parquet', hive_partitioning = false)"
    pods = f"read_parquet('{lake}/pods/*/*.parquet', hive_partitioning = false)"
    window = f"ts >= TIMESTAMPTZ '{start}' AND ts < TIMESTAMPTZ '{end}'"
    return {
        # GPU-hours and energy per namespace (the chargeback's grain before prices).
        "chargeback": f"""
            SELECT namespace, sum(share * step_s) / 3600 AS gpu_hours, sum(energy_j) / 3.6e6 AS kwh
            FROM {gpu} WHERE {window} GROUP BY namespace""",
        # The chargeback's 15-minute sums (the table gpuledger prices), as a GROUP BY over every
        # row: compare with the bucket pass's time in `RUST_LOG=gpuledger=debug gpuledger report
        # chargeback` on a lake without rollups.
        "chargeback_sums": f"""
            SELECT coalesce(cluster, 'default') AS cluster, namespace, node, gpu_model, mig_profile,
                   time_bucket(INTERVAL '15 minutes', ts) AS bucket, CAST(ts AS DATE) AS day, share, step_s,
                   count(*) AS n, sum(CAST(round(coalesce(energy_j, 0) * 1000) AS BIGINT)) AS energy_mj,
                   sum(CAST(round(coalesce(util_pct, 0) * share * step_s * 1000000) AS BIGINT)) AS util_gpu_us,
                   count(util_pct) AS util_n
            FROM {gpu} WHERE {window} GROUP BY ALL""",
        # Waits per namespace and priority class, and the pending demand per hour.
        "queue": [
            f"""SELECT namespace, priority_class, count(scheduled) AS scheduled, count(*) - count(scheduled) AS still_pending,
                       quantile_disc(epoch_ms(scheduled) - epoch_ms(created), 0.5) AS p50_ms,
                       quantile_disc(epoch_ms(scheduled) - epoch_ms(created), 0.95) AS p95_ms,
                       max(epoch_ms(scheduled) - epoch_ms(created)) AS max_ms
                FROM {pods} WHERE created >= TIMESTAMPTZ '{start}' AND created < TIMESTAMPTZ '{end}'
                GROUP BY ALL""",
            f"""SELECT date_trunc('hour', ts) AS hour, namespace, priority_class,
                       sum(step_s) / 3600.0 AS avg_pending_pods, sum(gpu_request * step_s) / 3600.0 AS avg_pending_gpus
                FROM {pending} WHERE {window} GROUP BY ALL""",
        ],
        # Allocated-but-idle stretches per pod (gaps and islands), unallocated GPU-hours per
        # node and model, zombie memory per GPU.
        "idle": [
            f"""WITH r AS (
                  SELECT namespace, pod, gpu_model, gpu_uuid, gpu_instance_id, ts, step_s, share,
                         coalesce(util_pct, 0) < {idle_pct} AS idle,
                         row_number() OVER (PARTITION BY gpu_uuid, gpu_instance_id, namespace, pod ORDER BY ts)
                       - row_number() OVER (PARTITION BY gpu_uuid, gpu_instance_id, namespace, pod, coalesce(util_pct, 0) < {idle_pct} ORDER BY ts) AS island
                  FROM {gpu} WHERE {window} AND pod IS NOT NULL),
                runs AS (
                  SELECT namespace, pod, gpu_model, sum(share * step_s) AS gpu_s, sum(step_s) AS secs
                  FROM r WHERE idle GROUP BY namespace, pod, gpu_model, gpu_uuid, gpu_instance_id, island)
                SELECT namespace, pod, gpu_model, sum(gpu_s) / 3600 AS idle_gpu_hours, count(*) AS idle_runs
                FROM runs WHERE secs >= {idle_secs} GROUP BY ALL""",
            f"""SELECT node, gpu_model, count(DISTINCT (gpu_uuid, gpu_instance_id)) AS units, sum(share * step_s) / 3600 AS gpu_hours
                FROM {gpu} WHERE {window} AND namespace IS NULL GROUP BY ALL""",
            f"""SELECT node, gpu_uuid, gpu_instance_id, count(*) AS steps, max(mem_used_mib) AS max_mem_mib, min(ts), max(ts)
                FROM {gpu} WHERE {window} AND namespace IS NULL AND coalesce(util_pct, 0) = 0 AND mem_used_mib > {zombie_mib}
                GROUP BY ALL""",
        ],
        # Whole GPUs each namespace held at once: seconds at each count, and pending GPU-seconds.
        "quota": [
            f"""WITH steps AS (
                  SELECT namespace, ts, ceil(sum(share) - 0.000001) AS gpus, min(step_s) AS step_s
                  FROM {gpu} WHERE {window} AND namespace IS NOT NULL AND namespace <> '__unmeasured__' AND mig_profile IS NULL
                  GROUP BY namespace, ts)
                SELECT namespace, gpus, sum(step_s) AS seconds FROM steps GROUP BY ALL""",
            f"""SELECT namespace, sum(gpu_request * step_s) AS pending_gpu_s FROM {pending}
                WHERE {window} AND coalesce(gpu_resource, 'nvidia.com/gpu') = 'nvidia.com/gpu' GROUP BY ALL""",
        ],
        # Rows present per day against GPUs seen x steps.
        "completeness": f"""
            SELECT CAST(ts AS DATE) AS day, count(*) AS rows, count(util_pct) AS util_rows,
                   count(DISTINCT (gpu_uuid, gpu_instance_id)) AS units, min(step_s) AS step_s
            FROM {gpu} WHERE {window} GROUP BY ALL""",
        # Allocation and utilisation by weekday and hour.
        "heatmap": f"""
            SELECT dayofweek(ts) AS dow, hour(ts) AS hour, sum(share * step_s) AS gpu_s,
                   sum(CASE WHEN namespace IS NOT NULL AND namespace <> '__unmeasured__' THEN share * step_s ELSE 0 END) AS allocated_s,
                   sum(coalesce(util_pct, 0) * share * step_s) AS util_s
            FROM {gpu} WHERE {window} GROUP BY ALL""",
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lake", required=True)
    p.add_argument("--from", dest="start", required=True)
    p.add_argument("--to", dest="end", required=True)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cold", action="store_true", help="one run, no warm-up")
    p.add_argument("--only", default=None, help="comma-separated reports")
    p.add_argument("--threads", type=int, default=None)
    a = p.parse_args()
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    if a.threads:
        con.execute(f"SET threads = {a.threads}")
    out = {}
    for name, sql in queries(a.lake, a.start, a.end).items():
        if a.only and name not in a.only.split(","):
            continue
        sqls = sql if isinstance(sql, list) else [sql]
        runs = 1 if a.cold else a.repeat + 1
        times = []
        rows = 0
        for i in range(runs):
            t = time.perf_counter()
            rows = sum(len(con.execute(q).fetchall()) for q in sqls)
            times.append(time.perf_counter() - t)
        best = times[0] if a.cold else min(times[1:])
        out[name] = {"secs": round(best, 3), "rows": rows}
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
