#!/usr/bin/env bash
# Collector throughput, two builds side by side on one Prometheus: the simulator's day of
# BENCH_GPUS GPUs (BENCH_SCRAPE s scrapes, default 57, with 3 s jitter, as real clusters scrape) backfilled with
# promtool, then `collect` of the day by binary A and binary B, alternating, BENCH_REPEAT times
# each; prints the samples per second each run logged and the wall time. Not part of the tests.
#
#   bash benches/collect_ab.sh OLD_BINARY NEW_BINARY
#   BENCH_GPUS=128 BENCH_REPEAT=5 bash benches/collect_ab.sh /tmp/gpuledger-base target/release/gpuledger
#
# Needs prometheus and promtool (Debian's prometheus package).
set -euo pipefail
A=$(realpath "$1"); B=$(realpath "$2")
GPUS=${BENCH_GPUS:-128}
REPEAT=${BENCH_REPEAT:-3}
WORK=${BENCH_DIR:-/tmp/gpuledger-collect-ab}
rm -rf "$WORK"; mkdir -p "$WORK"; cd "$WORK"
"$B" -q simulate --out sim --gpus "$GPUS" --days 1 --step 30 --seed 3 --start 2026-10-05 --openmetrics history.om \
  --scrape-interval "${BENCH_SCRAPE:-57}" --scrape-jitter 3
promtool tsdb create-blocks-from openmetrics history.om tsdb >/dev/null
rm history.om
printf 'global:\n  scrape_interval: 1m\nscrape_configs: []\n' > prometheus.yml
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
prometheus --config.file=prometheus.yml --storage.tsdb.path=tsdb --storage.tsdb.retention.time=100y \
  --web.listen-address=127.0.0.1:$PORT >prometheus.log 2>&1 &
PROM=$!
trap 'kill $PROM' EXIT
until curl -sf "http://127.0.0.1:$PORT/-/ready" >/dev/null; do sleep 0.5; done
for i in $(seq 1 "$REPEAT"); do
  for side in A B; do
    bin=$A; [ $side = B ] && bin=$B
    rm -rf lake
    s=$(date +%s.%N)
    "$bin" --lake lake --progress never collect --url "http://127.0.0.1:$PORT" --from 2026-10-05 --to 2026-10-06 2> log.txt
    e=$(date +%s.%N)
    rate=$(grep -o 'samples ([0-9]*/s)' log.txt | tr -dc '0-9')
    echo "run $i $side: $(python3 -c "print(f'{$e-$s:.2f}')") s wall, $rate samples/s"
  done
done
