#!/usr/bin/env bash
# The month close, measured (issue 22): every report end to end with the CLI (process start,
# session, rollups or samples, SQL, rendering) beside the query a DuckDB user would write for
# the same answer on the same lake (benches/analyst.py), the whole `run --no-collect` close,
# `gpuledger rollup --force`, the chargeback from the samples alone (no rollups) beside DuckDB's
# plain GROUP BY, and the lake's bytes per stored value. Writes $BENCH_DIR/close/results.md
# (pasted into docs/benchmarks.md, "Month close"). Not part of the test suite.
#
#   BENCH_LAKE=/path/to/month/lake bash benches/close.sh     # an existing simulated month
#   bash benches/close.sh                                     # simulates 1,024 GPUs x 30 days first
#   BENCH_GPUS=10000 BENCH_DAYS=30 bash benches/close.sh      # the 10,000-GPU month (~5 GB, ~30 min to simulate)
#   BENCH_PEERS=0 BENCH_REPEAT=0 BENCH_ROLLUP=0 ...           # gpuledger only, each command once, rollups as written
#
# Needs: a release build (cargo build --release --features ballista, or BENCH_BIN), python3 with
# duckdb (BENCH_VENV, created if missing), GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
GPUS=${BENCH_GPUS:-1024}
DAYS=${BENCH_DAYS:-30}
START=${BENCH_START:-2026-09-01}
MONTH=${START:0:7}
REPEAT=${BENCH_REPEAT:-3}
PEERS=${BENCH_PEERS:-1}
WORK=${BENCH_DIR:-/tmp/gpuledger-bench}/close
mkdir -p "$WORK"
log() { echo "[close $(date -u +%H:%M:%S)] $*" >&2; }

G=${BENCH_BIN:-$ROOT/target/release/gpuledger}
if [ -z "${BENCH_BIN:-}" ]; then
  log "building (release)"
  cargo build --release --locked --features ballista -q
fi
VENV=${BENCH_VENV:-$HOME/.cache/gpuledger/bench-venv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import duckdb' 2>/dev/null; then
  log "installing duckdb into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check duckdb
fi
PY="$VENV/bin/python"

LAKE=${BENCH_LAKE:-}
if [ -z "$LAKE" ]; then
  SIM="$WORK/month-$GPUS-$DAYS"
  if [ ! -f "$SIM/.done" ]; then
    rm -rf "$SIM"
    log "simulating $GPUS GPUs x $DAYS days at 30 s"
    /usr/bin/time -f "%e %M" -o "$WORK/simulate.time" "$G" --progress never simulate --out "$SIM" --gpus "$GPUS" --days "$DAYS" --start "$START" --step 30 2> "$WORK/simulate.log"
    touch "$SIM/.done"
  fi
  LAKE="$SIM/lake"
fi
FROM="${START}T00:00:00Z"
TO=$(python3 -c "import datetime as d; print((d.date.fromisoformat('$START')+d.timedelta(days=$DAYS)).isoformat()+'T00:00:00Z')")

# timed NAME CMD...: wall seconds and peak RSS (KiB) of CMD into $WORK/NAME.time ("secs kib").
timed() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$WORK/$name.time" "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" || echo "failed" >> "$WORK/$name.time"
}
# best NAME CMD...: the fastest of REPEAT runs after one warm-up.
best() {
  local name=$1; shift
  timed "$name" "$@"
  local b="" m=""
  [ "$REPEAT" -gt 0 ] || return 0
  for _ in $(seq 1 "$REPEAT"); do
    timed "$name.rep" "$@"
    read -r s k < "$WORK/$name.rep.time"
    if [ -z "$b" ] || python3 -c "import sys; sys.exit(0 if float('$s') < float('$b') else 1)"; then b=$s; m=$k; fi
  done
  echo "$b $m" > "$WORK/$name.time"
}

if [ "${BENCH_ROLLUP:-1}" != 0 ]; then
  log "rollup --force (every day's rollups rewritten from its samples)"
  timed rollup "$G" --progress never --lake "$LAKE" rollup --force
else
  echo "failed (not run: BENCH_ROLLUP=0)" > "$WORK/rollup.time"
fi
SAMPLES="$WORK/samples-lake"
rm -rf "$SAMPLES"
[ "$PEERS" = 0 ] || { cp -al "$LAKE" "$SAMPLES" && rm -rf "$SAMPLES/_rollups"; }

REPORTS="chargeback queue idle quota completeness heatmap"
for r in $REPORTS; do
  log "gpuledger report $r"
  rm -rf "$WORK/out-$r"
  best "report-$r" "$G" --progress never --lake "$LAKE" report "$r" --month "$MONTH" --format csv -o "$WORK/out-$r"
done
# The chargeback by a key of each pod (issue 47: from the `pod_buckets` rollup), beside the
# namespace chargeback above and DuckDB's chargeback query.
log "gpuledger report chargeback --by workload"
rm -rf "$WORK/out-chargeback-workload"
best "report-chargeback-workload" "$G" --progress never --lake "$LAKE" report chargeback --month "$MONTH" --by workload --format csv -o "$WORK/out-chargeback-workload"
if [ "$PEERS" != 0 ]; then
  log "gpuledger report chargeback from the samples alone"
  best "report-chargeback-samples" "$G" --progress never --lake "$SAMPLES" report chargeback --month "$MONTH" --format csv -o "$WORK/out-cs"
fi
log "gpuledger run --no-collect (every report, every format, the page, the PDF)"
rm -rf "$WORK/run-reports"
printf '[lake]\npath = "%s"\n' "$LAKE" > "$WORK/run.toml"
best "run" "$G" --progress never --config "$WORK/run.toml" run --no-collect --month "$MONTH" --reports-dir "$WORK/run-reports"
if [ "$PEERS" != 0 ]; then
  log "DuckDB, the analyst's queries (warm, best of $REPEAT)"
  "$PY" benches/analyst.py --lake "$SAMPLES" --from "$FROM" --to "$TO" --repeat "$REPEAT" > "$WORK/duckdb.json"
else
  echo '{}' > "$WORK/duckdb.json"
fi

# The GPU rows' bytes per column, as Parquet's footers record them (compressed).
"$PY" - "$LAKE" > "$WORK/columns.json" <<'EOF'
import duckdb, json, sys
c = duckdb.connect()
rows = c.execute(f"SELECT path_in_schema, sum(total_compressed_size) FROM parquet_metadata('{sys.argv[1]}/gpu_samples/*/*.parquet') GROUP BY 1 ORDER BY 2 DESC").fetchall()
print(json.dumps([[name, int(size)] for name, size in rows]))
EOF
ROWS=$("$G" --lake "$LAKE" query "SELECT count(*) AS n FROM gpu_samples" --format csv | tail -n 1)
GPU_BYTES=$(du -sb "$LAKE/gpu_samples" | cut -f1)
ROLLUP_BYTES=$(du -sb "$LAKE/_rollups" | cut -f1)
LAKE_BYTES=$(du -sb "$LAKE" | cut -f1)

python3 - "$WORK" "$GPUS" "$DAYS" "$ROWS" "$GPU_BYTES" "$ROLLUP_BYTES" "$LAKE_BYTES" "$REPORTS" <<'EOF' > "$WORK/results.md"
import json, sys
work, gpus, days, rows, gpu_bytes, rollup_bytes, lake_bytes, reports = sys.argv[1:]
rows, gpu_bytes, rollup_bytes, lake_bytes = int(rows), int(gpu_bytes), int(rollup_bytes), int(lake_bytes)
def t(name):
    parts = open(f"{work}/{name}.time").read().split()
    if "failed" in parts:
        return None, None
    return float(parts[0]), int(parts[1]) / 1024
duck = json.load(open(f"{work}/duckdb.json"))
print(f"Month of {int(gpus):,} GPUs x {days} days at 30 s ({rows:,} GPU rows); release build, 2 cores; CLI end to end, best of the repeats after a warm-up.\n")
print("| report | gpuledger (s) | peak RSS (MiB) | DuckDB analyst query (s) | gpuledger faster by |")
print("|---|---|---|---|---|")
for r in reports.split():
    s, m = t(f"report-{r}")
    d = duck.get(r, {}).get("secs")
    ratio = f"{d / s:.1f}x" if s and d else "n/a"
    dd = f"{d:.2f}" if d else "not run"
    print(f"| {r} | {s:.2f} | {m:.0f} | {dd} | {ratio} |" if s is not None else f"| {r} | failed | | {dd} | |")
s, m = t("report-chargeback-workload")
if s is not None:
    d = duck.get("chargeback", {}).get("secs")
    ns, _ = t("report-chargeback")
    dd, ratio = (f"{d:.2f}", f"{d / s:.1f}x") if d else ("not run", "n/a")
    print(f"| chargeback --by workload ({s / ns:.2f}x the namespace chargeback) | {s:.2f} | {m:.0f} | {dd} | {ratio} |")
if "chargeback" in duck:
    s, m = t("report-chargeback-samples")
    d = duck["chargeback"]["secs"]
    print(f"| chargeback, samples only (no rollups) | {s:.2f} | {m:.0f} | {d:.2f} | {d / s:.2f}x |")
s, m = t("run")
print(f"\n- `run --no-collect --month` (every report, every format, the workbook, the page and its PDF): **{s:.1f} s**, peak {m:.0f} MiB.")
s, m = t("rollup")
if s is not None:
    print(f"- `gpuledger rollup --force` (every day's rollups rewritten from its samples): {s:.1f} s, peak {m:.0f} MiB.")
print(f"- Lake: {lake_bytes:,} bytes; `gpu_samples` {gpu_bytes:,} bytes = **{gpu_bytes / (rows * 7):.2f} bytes per stored value** (7 DCGM values a row); rollups {rollup_bytes:,} bytes ({rollup_bytes / gpu_bytes * 100:.1f}% of `gpu_samples`).")
columns = json.load(open(f"{work}/columns.json"))
print("- `gpu_samples` bytes per row by column: " + ", ".join(f"{name} {size / rows:.3f}" for name, size in columns if size / rows >= 0.01) + f"; the {sum(1 for _, size in columns if size / rows < 0.01)} others {sum(size for _, size in columns if size / rows < 0.01) / rows:.3f} together.")
if "peak_rss_mib" in duck:
    print(f"- DuckDB peak RSS over its queries: {duck['peak_rss_mib']} MiB.")
EOF
cat "$WORK/results.md"
