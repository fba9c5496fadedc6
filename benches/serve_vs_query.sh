#!/usr/bin/env bash
# The cookbook's questions (queries/examples/*.sql) side by side: through `gpuledger serve`
# with psql (a warm server: what a BI tool sees) and through `gpuledger query` (a process per
# question: what a cron job or a shell sees), on the same lake, each the median of REPEAT
# runs, wall clock of the client. Both answers must have the same number of rows. Prints a
# Markdown table. Not part of the test suite.
#
#   bash benches/serve_vs_query.sh                     # a demo month of 64 GPUs (2026-10)
#   BENCH_GPUS=256 bash benches/serve_vs_query.sh      # a bigger pool
#
# Needs: cargo, psql (Debian's postgresql-client).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
GPUS=${BENCH_GPUS:-64}
REPEAT=${BENCH_REPEAT:-5}
WORK=${BENCH_DIR:-/tmp/gpuledger-serve-bench}
PORT=${BENCH_PORT:-55439}
MONTH=2026-10
BIN=${GPULEDGER_BIN:-$ROOT/target/release/gpuledger}
log() { echo "[bench $(date -u +%H:%M:%S)] $*" >&2; }

[ -x "$BIN" ] || cargo build --release --locked
mkdir -p "$WORK"
if [ ! -d "$WORK/demo-$GPUS/lake" ]; then
  log "demo month of $GPUS GPUs into $WORK/demo-$GPUS"
  "$BIN" --progress never demo --out "$WORK/demo-$GPUS" --month "$MONTH" --gpus "$GPUS" >/dev/null
fi
CFG="$WORK/demo-$GPUS/gpuledger.toml"
printf 'bench:bench-password\n' > "$WORK/users.txt"
"$BIN" --progress never --config "$CFG" serve --listen "127.0.0.1:$PORT" --users "$WORK/users.txt" 2>"$WORK/serve.log" &
SERVE=$!
trap 'kill $SERVE 2>/dev/null || true' EXIT
export PGPASSWORD=bench-password
for _ in $(seq 100); do
  psql -h 127.0.0.1 -p "$PORT" -U bench -d gpuledger -At -c 'SELECT 1' >/dev/null 2>&1 && break
  sleep 0.1
done

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "| question | rows | serve via psql (s) | gpuledger query (s) |"
echo "|---|---:|---:|---:|"
for f in queries/examples/*.sql; do
  # The file's second line is its own command line: its --param k=v pairs.
  params=$(sed -n 2p "$f" | grep -o -- '--param [^ ]*' | sed 's/--param //' || true)
  sql=$(grep -v '^--' "$f")
  args=()
  for p in $params; do
    k=${p%%=*}; v=${p#*=}
    sql=${sql//\$$k/\'$v\'}
    args+=(--param "$p")
  done
  serve_times=(); query_times=()
  for _ in $(seq "$REPEAT"); do
    t=$(now); rows_serve=$(psql -h 127.0.0.1 -p "$PORT" -U bench -d gpuledger -At -c "$sql" | wc -l); serve_times+=("$(echo "$(now) - $t" | bc)")
    t=$(now); rows_query=$("$BIN" --progress never --config "$CFG" query -f "$f" "${args[@]}" --format csv | tail -n +2 | wc -l); query_times+=("$(echo "$(now) - $t" | bc)")
  done
  [ "$rows_serve" = "$rows_query" ] || { echo "$f: $rows_serve rows through serve, $rows_query through query" >&2; exit 1; }
  printf '| %s | %s | %.3f | %.3f |\n' "$(basename "$f" .sql)" "$rows_serve" \
    "$(printf '%s\n' "${serve_times[@]}" | median)" "$(printf '%s\n' "${query_times[@]}" | median)"
done
log "serve's log: $WORK/serve.log"
