#!/bin/sh
# Builds gpuledger (and with BALLISTA=1 the stock Ballista scheduler and executor, from the same
# lockfile and DataFusion) in release mode and copies the programs into the folder $1.
set -eu
out="$1"
mkdir -p "$out"
if [ "${BALLISTA:-0}" = 1 ]; then
  cargo build --release --locked --features gpuledger/ballista -p gpuledger -p ballista-scheduler -p ballista-executor \
    --bin gpuledger --bin ballista-scheduler --bin ballista-executor
  cp target/release/ballista-scheduler target/release/ballista-executor "$out/"
else
  cargo build --release --locked
fi
cp target/release/gpuledger "$out/"
