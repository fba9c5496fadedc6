#!/usr/bin/env bash
# Side-by-side benchmark of gpuledger (issue 7): builds the lakes, times gpuledger's monthly
# rollups in process and DuckDB running the same SQL on the same Parquet files (warm and cold
# file cache), PromQL on a Prometheus holding the same history (a smaller slice: the month of
# 1,024 GPUs cannot be backfilled here), compares bytes per stored value of the lake and the
# Prometheus TSDB, measures the collector against that Prometheus, and writes
# docs/benchmarks.md. Not part of the test suite.
#
#   bash benches/run.sh                 # the full run: 1,024 GPUs x 30 days (88 M GPU rows)
#   BENCH_GPUS=256 BENCH_DAYS=7 bash benches/run.sh   # a quicker look
#   BENCH_PROM_GPUS / BENCH_PROM_GPUS2 / BENCH_PROM_DAYS: the two PromQL slices (64 and 128 GPUs x 7 days)
#
# Needs: cargo, python3 (venv), prometheus + promtool (Debian's prometheus package), about
# 30 GB of free disk under BENCH_DIR (default /tmp/gpuledger-bench; the 128-GPU slice's OpenMetrics
# text is about 16 GB while it is loaded, 10 GB stays).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

GPUS=${BENCH_GPUS:-1024}
DAYS=${BENCH_DAYS:-30}
PROM_GPUS=${BENCH_PROM_GPUS:-64}
PROM_DAYS=${BENCH_PROM_DAYS:-7}
REPEAT=${BENCH_REPEAT:-3}
WORK=${BENCH_DIR:-/tmp/gpuledger-bench}
START=2026-09-01
PROM_START=2026-09-01
mkdir -p "$WORK/results"
R="$WORK/results"
log() { echo "[bench $(date -u +%H:%M:%S)] $*" >&2; }
secs_since() { python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$1"; }

log "building (release)"
cargo build --release --locked -q
cargo bench --bench rollups --no-run --locked -q 2>/dev/null || cargo bench --bench rollups --no-run --locked
BENCH_BIN=$(ls -t target/release/deps/rollups-* | grep -v '\.d$' | head -n 1)
G="$ROOT/target/release/gpuledger"

VENV=${BENCH_VENV:-$HOME/.cache/gpuledger/bench-venv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import duckdb' 2>/dev/null; then
  log "installing duckdb into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check duckdb
fi
PY="$VENV/bin/python"

failed() {
  python3 -c 'import json,sys; print(json.dumps({"error": open(sys.argv[1] + ".err").read().strip().splitlines()[0][:300]}))' "$1" > "$1.json"
  log "failed: $(cat "$1.json")"
}

drop_caches() {
  sync
  if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; echo yes; else echo no; fi
}

# 1. The month lake.
LAKE="$WORK/month"
if [ ! -f "$LAKE/.done-$GPUS-$DAYS" ]; then
  rm -rf "$LAKE"
  log "simulating $GPUS GPUs x $DAYS days at 30 s"
  t0=$(date +%s.%N)
  "$G" --progress never simulate --out "$LAKE" --gpus "$GPUS" --days "$DAYS" --start "$START" --step 30 2> "$R/simulate.log"
  echo "{\"secs\": $(secs_since "$t0")}" > "$R/simulate.json"
  touch "$LAKE/.done-$GPUS-$DAYS"
fi
# The 15-minute rollups are written with each day file; time writing all of them again (what
# simulate / collect spent on them), and keep a copy of the lake without them (hard links) for
# the chargeback from the samples.
log "rewriting the month's rollups (gpuledger rollup --force)"
t0=$(date +%s.%N)
"$G" --progress never --lake "$LAKE/lake" rollup --force > "$R/rollup.log" 2>&1
echo "{\"secs\": $(secs_since "$t0")}" > "$R/rollup.json"
du -sb "$LAKE/lake/_rollups" | cut -f1 > "$R/rollup_bytes.txt"
SAMPLES_LAKE="$WORK/month-samples/lake"
rm -rf "$WORK/month-samples" && mkdir -p "$WORK/month-samples"
cp -al "$LAKE/lake" "$SAMPLES_LAKE" && rm -rf "$SAMPLES_LAKE/_rollups"
FROM="${START}T00:00:00Z"
TO=$(python3 -c "import datetime as d; print((d.date.fromisoformat('$START')+d.timedelta(days=$DAYS)).isoformat()+'T00:00:00Z')")
"$G" --lake "$LAKE/lake" query "SELECT count(*) AS rows FROM gpu_samples" --format json > "$R/rows.json"
du -sb "$LAKE/lake/gpu_samples" | cut -f1 > "$R/lake_gpu_bytes.txt"
du -sb "$LAKE/lake" | cut -f1 > "$R/lake_bytes.txt"

# The config tables, as Parquet, for DuckDB.
mkdir -p "$WORK/tables"
for t in gpu_prices cpu_prices memory_prices power_tariff calendar teams; do
  "$G" --lake "$LAKE/lake" query "SELECT * FROM $t" --format parquet -o "$WORK/tables/$t.parquet"
done

# 2. gpuledger vs DuckDB on the month, cold file cache then warm.
for side in gpuledger duckdb; do
  for cache in cold warm; do
    for report in chargeback chargeback_samples idle queue; do
      # chargeback: the 15-minute sums from the lake's rollups (both sides read the same files);
      # chargeback_samples: from every sample (the lake without its rollups; DuckDB's GROUP BY).
      lake="$LAKE/lake"; only=$report; from=rollups
      [ "$report" = chargeback_samples ] && { lake="$SAMPLES_LAKE"; only=chargeback; from=samples; }
      [ "$cache" = cold ] && dropped=$(drop_caches) || dropped=n/a
      reps=$REPEAT; [ "$cache" = cold ] && reps=1
      log "$side $report ($cache cache)"
      # A side that fails (out of memory, say) is recorded as failed, and the run goes on.
      if [ "$side" = gpuledger ]; then
        GPULEDGER_BENCH_LAKE="$lake" GPULEDGER_BENCH_FROM="$FROM" GPULEDGER_BENCH_TO="$TO" GPULEDGER_BENCH_REPEAT=$reps GPULEDGER_BENCH_ONLY=$only \
          RUST_BACKTRACE=0 "$BENCH_BIN" > "$R/$side-$report-$cache.json" 2> "$R/$side-$report-$cache.err" || failed "$R/$side-$report-$cache"
      else
        "$PY" benches/duckdb_side.py --lake "$lake" --tables "$WORK/tables" --queries queries --from "$FROM" --to "$TO" --repeat $reps --only $only --buckets-from $from \
          > "$R/$side-$report-$cache.json" 2> "$R/$side-$report-$cache.err" || failed "$R/$side-$report-$cache"
      fi
      echo "$dropped" > "$R/$side-$report-$cache.dropped"
    done
  done
done
# The CLI end to end (process start, session, SQL, rendering), with its peak RSS.
for report in chargeback idle queue; do
  /usr/bin/time -f "%e %M" -o "$R/cli-$report.time" "$G" --lake "$LAKE/lake" report "$report" --from "$FROM" --to "$TO" --format csv -o "$WORK/cli-$report" > /dev/null 2> "$R/cli-$report.err" \
    || echo "failed: $(grep -m1 -o 'error: .*' "$R/cli-$report.err" | cut -c1-200)" >> "$R/cli-$report.time"
done

# 3. PromQL on slices: the same simulator, smaller, into Prometheus with promtool; two sizes,
# to measure how PromQL's time grows with the samples it reads.
PORT=${BENCH_PROM_PORT:-19590}
PFROM="${PROM_START}T00:00:00Z"
PTO=$(python3 -c "import datetime as d; print((d.date.fromisoformat('$PROM_START')+d.timedelta(days=$PROM_DAYS)).isoformat()+'T00:00:00Z')")
PROM_PID=
trap '[ -n "$PROM_PID" ] && kill $PROM_PID 2>/dev/null || true' EXIT
# prom_slice GPUS: builds (once) and loads the slice of GPUS GPUs x PROM_DAYS days, starts
# Prometheus on it (PROM_PID, left running), times PromQL and gpuledger's chargeback on it.
prom_slice() {
  local gpus=$1 tag="$1-$PROM_DAYS" slice="$WORK/slice-$1-$PROM_DAYS"
  if [ ! -f "$slice/.done-$tag" ]; then
    rm -rf "$slice"
    log "simulating the PromQL slice: $gpus GPUs x $PROM_DAYS days, with OpenMetrics"
    "$G" --progress never simulate --out "$slice" --gpus "$gpus" --days "$PROM_DAYS" --start "$PROM_START" --step 30 --openmetrics "$slice/history.om" 2> "$R/slice-$tag-simulate.log"
    # The DCGM families alone, for the storage comparison (same samples as gpu_samples' values).
    grep -E '^(# (HELP|TYPE) )?DCGM_' "$slice/history.om" > "$slice/dcgm.om"; echo '# EOF' >> "$slice/dcgm.om"
    rm -f "$slice/history.om"
    # Only the DCGM families: they are what the chargeback asks of Prometheus (the slice's
    # kube-state-metrics series would add 7x as many samples). Blocks as long as the slice, as
    # Prometheus' compaction would make them.
    log "promtool: backfilling the slice's DCGM series"
    t0=$(date +%s.%N)
    promtool tsdb create-blocks-from openmetrics --max-block-duration="$((PROM_DAYS * 24))h" "$slice/dcgm.om" "$slice/tsdb" > "$R/promtool-$tag.log" 2>&1
    echo "{\"secs\": $(secs_since "$t0")}" > "$R/promtool-$tag.json"
    touch "$slice/.done-$tag"
  fi
  grep -v '^#' "$slice/dcgm.om" | wc -l > "$R/dcgm_samples-$tag.txt"
  du -sb "$slice/tsdb" | cut -f1 > "$R/tsdb_dcgm_bytes-$tag.txt"
  "$G" --progress never --lake "$slice/lake" rollup > /dev/null
  "$G" --lake "$slice/lake" query "SELECT count(*) AS rows FROM gpu_samples" --format json > "$R/slice_rows-$tag.json"
  du -sb "$slice/lake/gpu_samples" | cut -f1 > "$R/slice_gpu_bytes-$tag.txt"
  prometheus --storage.tsdb.path="$slice/tsdb" --web.listen-address="127.0.0.1:$PORT" --storage.tsdb.retention.time=100y \
    --config.file=<(echo 'global: {scrape_interval: 1h}') --query.timeout=30m --query.max-samples=2000000000 > "$WORK/prometheus.log" 2>&1 &
  PROM_PID=$!
  for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$PORT/-/ready" > /dev/null && break; sleep 1; done
  log "PromQL on the $tag slice"
  "$PY" benches/promql_side.py --url "http://127.0.0.1:$PORT" --from "$PFROM" --to "$PTO" --repeat "$REPEAT" > "$R/promql-$tag.json"
  ps -o rss= -p $PROM_PID | tr -d ' ' > "$R/prometheus_rss_kib-$tag.txt"
  log "gpuledger on the $tag slice"
  GPULEDGER_BENCH_LAKE="$slice/lake" GPULEDGER_BENCH_FROM="$PFROM" GPULEDGER_BENCH_TO="$PTO" GPULEDGER_BENCH_REPEAT=$REPEAT GPULEDGER_BENCH_ONLY=chargeback \
    "$BENCH_BIN" > "$R/gpuledger-slice-$tag-chargeback.json"
}
PROM_GPUS2=${BENCH_PROM_GPUS2:-$((PROM_GPUS * 2))}
prom_slice "$PROM_GPUS2"
kill $PROM_PID; wait $PROM_PID 2>/dev/null || true
prom_slice "$PROM_GPUS"

# 4. The collector against that Prometheus (DCGM series only): samples per second by chunk size
# and concurrency.
: > "$R/collect.txt"
for chunk in 3600 21600 86400; do
  for conc in 1 4 8; do
    rm -rf "$WORK/collect-lake"
    printf '[lake]\npath = "%s"\n[prometheus]\nurl = "http://127.0.0.1:%s"\nchunk_secs = %s\nconcurrency = %s\ntimeout_secs = 600\n' \
      "$WORK/collect-lake" "$PORT" "$chunk" "$conc" > "$WORK/collect.toml"
    log "collect chunk=$chunk concurrency=$conc"
    t0=$(date +%s.%N)
    "$G" --config "$WORK/collect.toml" --progress never collect --from "$PFROM" --to "$PTO" 2> "$WORK/collect.log"
    wall=$(secs_since "$t0")
    line=$(grep -o 'collected .*' "$WORK/collect.log" | tail -n 1)
    echo "$chunk $conc $wall $line" >> "$R/collect.txt"
  done
done
kill $PROM_PID 2>/dev/null || true

# 5. The report.
python3 benches/report.py --results "$R" --gpus "$GPUS" --days "$DAYS" --prom-gpus "$PROM_GPUS" --prom-gpus2 "$PROM_GPUS2" --prom-days "$PROM_DAYS" > docs/benchmarks.md
log "wrote docs/benchmarks.md"
