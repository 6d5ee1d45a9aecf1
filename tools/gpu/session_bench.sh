#!/usr/bin/env bash
# One GPU call for the figures: the full benchmark (writes docs/benchmarks.{json,md,png}),
# then the launch-overhead probe and lesson 6's GPU script. From the repository root, after
# the wheels are in place:
#     bash .whl/on-device.sh bash tools/gpu/session_bench.sh
# Brings back $OUT/benchmarks.{json,md,png} and $OUT/logs.tgz (every other log).
set -uo pipefail
OUT=${OUT:-$PWD/.gpu-out}; mkdir -p "$OUT/sub"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 300 python3 -m cudacourse.bench --no-progress --json docs/benchmarks.json \
  --markdown docs/benchmarks.md --plot docs/benchmarks.png > "$OUT/sub/bench.log" 2>&1
echo "bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/sub/bench.log"
cp docs/benchmarks.json docs/benchmarks.md docs/benchmarks.png "$OUT/" 2>/dev/null
tail -5 "$OUT/sub/bench.log"
OUT="$OUT/sub" timeout 100 bash tools/gpu/launch_overhead.sh 2>&1 | tail -12
OUT="$OUT/sub" SKIP_BENCH=1 timeout 240 bash tools/gpu/lesson6.sh 2>&1 | grep -v "^   " | tail -40
(cd "$OUT/sub" && tar czf "$OUT/logs.tgz" .) && rm -rf "$OUT/sub"
echo "session_bench done in $(( $(date +%s) - t0 )) s"
