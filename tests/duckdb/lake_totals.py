#!/usr/bin/env python3
"""Reads a gpuledger lake with DuckDB alone, the way an analyst with no gpuledger would: the
Hive-partitioned Parquet of `gpu_samples` and `nodes`, nothing else, and SQL written here
(not gpuledger's queries). Prints, per namespace (`__unallocated__` for GPU time with no pod),
the window's GPU-microseconds, millijoules and GPU cost at the given per-GPU-hour prices, as
JSON; `tests/it/other_engines.rs` compares them with gpuledger's chargeback.

Usage: lake_totals.py --lake LAKE --from T --to T --price MODEL=PRICE [...]
"""
import argparse
import json
import sys
from decimal import Decimal

import duckdb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", required=True)
    ap.add_argument("--from", dest="start", required=True)
    ap.add_argument("--to", dest="end", required=True)
    ap.add_argument("--price", action="append", default=[], help="MODEL=PRICE per GPU-hour")
    a = ap.parse_args()
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE TABLE prices (model VARCHAR, price DECIMAL(18, 6))")
    for p in a.price:
        model, price = p.rsplit("=", 1)
        con.execute("INSERT INTO prices VALUES (?, ?)", [model, price])
    # Hive partitioning: the `date=YYYY-MM-DD` folder becomes a column, and a filter on it
    # reads only those days' files.
    con.execute(
        f"CREATE VIEW gpu_samples AS SELECT * FROM read_parquet('{a.lake}/gpu_samples/*/*.parquet', hive_partitioning = true)"
    )
    rows = con.execute(
        """
        WITH s AS (
          SELECT COALESCE(namespace, '__unallocated__') AS namespace, gpu_model,
                 CAST(ROUND(share * step_s * 1000000) AS BIGINT) AS gpu_us,
                 CAST(ROUND(COALESCE(energy_j, 0) * 1000) AS BIGINT) AS energy_mj
          FROM gpu_samples
          WHERE date >= CAST(CAST(? AS TIMESTAMPTZ) AS DATE) AND date <= CAST(CAST(? AS TIMESTAMPTZ) - INTERVAL 1 MILLISECOND AS DATE)
            AND ts >= CAST(? AS TIMESTAMPTZ) AND ts < CAST(? AS TIMESTAMPTZ)
        )
        SELECT s.namespace, SUM(s.gpu_us), SUM(s.energy_mj),
               SUM(CAST(s.gpu_us AS DECIMAL(38, 0)) * COALESCE(p.price, 0)),
               COUNT(*)
        FROM s LEFT JOIN prices p ON p.model = s.gpu_model
        GROUP BY s.namespace ORDER BY s.namespace
        """,
        [a.start, a.end, a.start, a.end],
    ).fetchall()
    out = {
        ns: {"gpu_us": int(us), "energy_mj": int(mj), "gpu_cost_us": str(Decimal(cost)), "rows": int(n)}
        for ns, us, mj, cost, n in rows
    }
    json.dump({"duckdb": duckdb.__version__, "namespaces": out}, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
