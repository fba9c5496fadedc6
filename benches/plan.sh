#!/usr/bin/env bash
# How fast `gpuledger plan` replays a month: a simulated month of 1,024 GPUs (128 nodes, about
# 130,000 pods) replayed as recorded five times in one run (the baseline and four scenarios that
# change nothing), the load from the lake, and an optimiser run.
#
#   bash benches/plan.sh                                # 1,024 GPUs x 30 days
#   BENCH_GPUS=256 BENCH_DAYS=7 bash benches/plan.sh    # a quicker look
#
# The lake is kept under BENCH_DIR (default /tmp/gpuledger-bench-plan; about 0.5 GB) and reused.
set -euo pipefail
cd "$(dirname "$0")/.."
GPUS=${BENCH_GPUS:-1024}
DAYS=${BENCH_DAYS:-30}
WORK=${BENCH_DIR:-/tmp/gpuledger-bench-plan}
BIN=target/release/gpuledger
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --locked -q
mkdir -p "$WORK"
LAKE="$WORK/m$GPUS-$DAYS"
if [ ! -d "$LAKE/lake" ]; then
  echo "simulating $GPUS GPUs x $DAYS days into $LAKE"
  "$BIN" --progress never simulate --out "$LAKE" --gpus "$GPUS" --days "$DAYS" --seed 11 --start 2026-09-01 2>&1 | tail -n 2
fi
SCEN="$WORK/same.toml"
printf '[[scenario]]\nname = "a"\n[[scenario]]\nname = "b"\n[[scenario]]\nname = "c"\n[[scenario]]\nname = "d"\n' > "$SCEN"
FROM=2026-09-01
TO=$(date -u -d "$FROM + $DAYS days" +%Y-%m-%d)
echo "== replay x5 (baseline + 4 identical scenarios), $GPUS GPUs x $DAYS days"
start=$(date +%s.%N)
"$BIN" --progress never --lake "$LAKE/lake" plan --from "$FROM" --to "$TO" --scenario "$SCEN" --format json -o "$WORK/plan.json" 2> "$WORK/plan.log"
end=$(date +%s.%N)
grep -o 'replayed in [0-9]* ms ([0-9]* binding passes, [0-9]* pods)' "$WORK/plan.log"
ms=$(grep -o 'replayed in [0-9]* ms' "$WORK/plan.log" | awk '{print $3}' | sort -n)
echo "replay ms: min $(echo "$ms" | head -n1), median $(echo "$ms" | sed -n 3p), max $(echo "$ms" | tail -n1)"
echo "whole command (load + 5 replays + reports): $(echo "$end - $start" | bc) s"
note() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([n for s in d for n in s["notes"] if n.startswith(sys.argv[2])][0])' "$@"; }
note "$WORK/plan.json" calibration
echo "== --optimize, 30 replays"
start=$(date +%s.%N)
"$BIN" --progress never --lake "$LAKE/lake" plan --from "$FROM" --to "$TO" --optimize --max-replays 30 --format json -o "$WORK/opt.json" 2> "$WORK/opt.log"
end=$(date +%s.%N)
grep -o 'the search ran .*' "$WORK/opt.log" || true
echo "whole command: $(echo "$end - $start" | bc) s"
note "$WORK/opt.json" optimized
