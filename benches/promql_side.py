#!/usr/bin/env python3
"""The PromQL side of the benchmark: the chargeback's numbers (GPU-hours and energy per
namespace and GPU model over the window) asked of a Prometheus holding the same history, the
way a user without gpuledger would: one instant query over the whole window, and a
query_range at a 1 h step summed client-side.

Usage: promql_side.py --url URL --from T --to T [--repeat N]
Prints one JSON object with the seconds of each form and the series returned.
"""
import argparse
import datetime as dt
import json
import time
import urllib.parse
import urllib.request


def get(url, path, params):
    q = urllib.parse.urlencode(params)
    t0 = time.perf_counter()
    with urllib.request.urlopen(f"{url}{path}?{q}", timeout=3600) as r:
        body = json.load(r)
    secs = time.perf_counter() - t0
    if body.get("status") != "success":
        raise SystemExit(f"{path} {params}: {body}")
    return secs, body["data"]["result"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--from", dest="start", required=True)
    ap.add_argument("--to", dest="end", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    start = dt.datetime.fromisoformat(a.start.replace("Z", "+00:00")).timestamp()
    end = dt.datetime.fromisoformat(a.end.replace("Z", "+00:00")).timestamp()
    days = round((end - start) / 86400)
    # GPU-steps per namespace and model (x step = GPU time), and energy per namespace.
    hours = 'sum by (namespace, modelName) (count_over_time(DCGM_FI_DEV_FB_USED[{r}]))'
    energy = 'sum by (namespace) (increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[{r}]))'
    out = {}
    for form in ["instant", "range_1h"]:
        secs, series = [], 0
        for _ in range(a.repeat):
            total = 0.0
            n = 0
            for q in (hours, energy):
                if form == "instant":
                    s, res = get(a.url, "/api/v1/query", {"query": q.format(r=f"{days}d"), "time": end})
                else:
                    s, res = get(a.url, "/api/v1/query_range", {"query": q.format(r="1h"), "start": start + 3600, "end": end, "step": 3600})
                total += s
                n += len(res)
            secs.append(total)
            series = n
        out[form] = {"secs": secs, "series": series}
    json.dump(out, __import__("sys").stdout)
    print()


if __name__ == "__main__":
    main()
