#!/usr/bin/env bash
# Issue 15 on the GPU, one call: the tile sweep and the peers (tools/probe_attention.py), then
# the full `cudacourse bench` with the sweep's fastest "fast" tile shapes. From the repo root:
#     bash .whl/on-device.sh bash tools/gpu/perf.sh
# Writes $OUT/probe_attention.json, $OUT/fast_configs.json, $OUT/bench.json, $OUT/bench.md,
# $OUT/probe.log, $OUT/bench.log.
set -uo pipefail
OUT=${OUT:-.}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee $OUT/smi.log
PROBE_BUDGET_S=${PROBE_BUDGET_S:-140} timeout 185 python3 tools/probe_attention.py 2>&1 | tee $OUT/probe.log
if [ -s "$OUT/fast_configs.json" ] && [ "$(cat $OUT/fast_configs.json)" != "{}" ]; then
  export CUDACOURSE_FAST_CONFIGS=$OUT/fast_configs.json
fi
start=$(date +%s)
CUDACOURSE_BENCH_PROG="python3 -m cudacourse.bench" timeout ${BENCH_TIMEOUT:-200} \
  python3 -m cudacourse.bench --no-progress --json $OUT/bench.json --markdown $OUT/bench.md \
  ${BENCH_ARGS:-} 2>&1 | tee $OUT/bench.log
echo "bench took $(( $(date +%s) - start )) s" | tee -a $OUT/bench.log
