#!/usr/bin/env bash
# One GPU call that proves the course on the H200: the whole test suite in GPU mode (the
# wrong-kernel catalogues, the engine, every master notebook), the sample class graded in the
# sandbox, and (BENCH6=1) lesson 6's bench merged into docs/benchmarks.json. From the repository root:
#     bash .whl/on-device.sh bash tools/gpu/session_verify.sh
# Brings back $OUT/summary.txt, $OUT/pytest.xml and $OUT/logs.tgz.
set -uo pipefail
OUT=${OUT:-$PWD/.gpu-out}; mkdir -p "$OUT/sub"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
say() { echo "== $(date -u +%T) +$(( $(date +%s) - t0 ))s $*" | tee -a "$OUT/summary.txt"; }
# a carried bwrap and its libraries, where tools/gpu/grading.sh looks for them
if [ -f .gpuwhl/bwrap ] && [ ! -f .whl/bwrap ]; then
  mkdir -p .whl && cp .gpuwhl/bwrap .whl/bwrap && cp -r .gpuwhl/lib .whl/bwrap-lib
fi
say "tests (GPU mode, -n 8), beside them the sample class graded in the sandbox, then the grading tests"
( CUDACOURSE_DEVICE=gpu timeout 400 python3 -m pytest -q -n 8 -p no:cacheprovider -rfEs \
    --durations=30 --junitxml="$OUT/pytest.xml" -m "not grading" > "$OUT/sub/pytest.log" 2>&1
  echo "pytest exit $?" >> "$OUT/sub/pytest.log" ) &
tests=$!
OUT="$OUT/sub" timeout 220 bash tools/gpu/grading.sh > "$OUT/sub/grading.log" 2>&1
say "grading.sh exit $?"
grep -E "^== |^ok |^BAD" "$OUT/sub/grading.log" | tail -45 >> "$OUT/summary.txt"
CUDACOURSE_DEVICE=gpu timeout 200 python3 -m pytest -q -n 4 -p no:cacheprovider -rfEs -m grading \
   > "$OUT/sub/pytest_grading.log" 2>&1
say "grading tests exit $?: $(grep -E 'passed|failed' "$OUT/sub/pytest_grading.log" | tail -1)"
grep -E "^(FAILED|ERROR)" "$OUT/sub/pytest_grading.log" | head -20 >> "$OUT/summary.txt"
wait $tests
say "$(tail -1 "$OUT/sub/pytest.log")"
grep -E "passed|failed|error" "$OUT/sub/pytest.log" | tail -3 >> "$OUT/summary.txt"
grep -E "^(FAILED|ERROR)" "$OUT/sub/pytest.log" | head -60 >> "$OUT/summary.txt"
if [ -n "${BENCH6:-}" ]; then
  say "lesson 6 bench, merged into docs/benchmarks.json"
  timeout 120 python3 -m cudacourse.bench --no-progress --only stencil,lbm,lbm_cupy --merge \
    --json docs/benchmarks.json --markdown docs/benchmarks.md > "$OUT/sub/bench6.log" 2>&1
  say "bench6 exit $?"; cp docs/benchmarks.json docs/benchmarks.md "$OUT/"
fi
(cd "$OUT/sub" && tar czf "$OUT/logs.tgz" .) && rm -rf "$OUT/sub"
say "done"
