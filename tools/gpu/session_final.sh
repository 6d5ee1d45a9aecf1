#!/usr/bin/env bash
# The last GPU call of a session: lesson 6's bench merged into docs/benchmarks.json (alone on
# the GPU, for honest timings), then the whole test suite in GPU mode with every result named
# as it comes (-v), the grading tests beside it. From the repository root:
#     bash .whl/on-device.sh bash tools/gpu/session_final.sh
# Brings back $OUT/summary.txt, $OUT/benchmarks.{json,md} and $OUT/logs.tgz.
set -uo pipefail
OUT=${OUT:-$PWD/.gpu-out}; mkdir -p "$OUT/sub"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
say() { echo "== $(date -u +%T) +$(( $(date +%s) - t0 ))s $*" | tee -a "$OUT/summary.txt"; }
if [ -f .gpuwhl/bwrap ] && [ ! -f .whl/bwrap ]; then
  mkdir -p .whl && cp .gpuwhl/bwrap .whl/bwrap && cp -r .gpuwhl/lib .whl/bwrap-lib
fi
say "lesson 6 bench, merged"
timeout ${BENCH_S:-100} python3 -m cudacourse.bench --no-progress --only stencil,lbm,lbm_cupy --merge \
  --json docs/benchmarks.json --markdown docs/benchmarks.md > "$OUT/sub/bench6.log" 2>&1
say "bench6 exit $?"; cp docs/benchmarks.json docs/benchmarks.md "$OUT/"
grep -E "stencil|lbm" "$OUT/sub/bench6.log" | tail -25 >> "$OUT/summary.txt"
say "tests (GPU mode, -v) and grading tests side by side"
( CUDACOURSE_DEVICE=gpu timeout ${TESTS_S:-290} python3 -m pytest -v -n 11 -p no:cacheprovider \
    --timeout 150 -m "not grading" > "$OUT/sub/pytest.log" 2>&1; echo "pytest exit $?" >> "$OUT/sub/pytest.log" ) &
a=$!
( CUDACOURSE_DEVICE=gpu timeout ${TESTS_S:-290} python3 -m pytest -v -n 4 -p no:cacheprovider \
    --timeout 250 -m grading > "$OUT/sub/pytest_grading.log" 2>&1; echo "pytest exit $?" >> "$OUT/sub/pytest_grading.log" ) &
b=$!
wait $a $b
for f in pytest pytest_grading; do
  say "$f: $(tail -1 "$OUT/sub/$f.log"); $(grep -c ' PASSED ' "$OUT/sub/$f.log") passed, $(grep -c ' SKIPPED ' "$OUT/sub/$f.log") skipped"
  grep -E " (FAILED|ERROR) " "$OUT/sub/$f.log" | sed 's/^/   /' | head -40 >> "$OUT/summary.txt"
  grep -E "^(FAILED|ERROR) |passed|failed" "$OUT/sub/$f.log" | tail -30 >> "$OUT/summary.txt"
done
(cd "$OUT/sub" && tar czf "$OUT/logs.tgz" .) && rm -rf "$OUT/sub"
say "done"
