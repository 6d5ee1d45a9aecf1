#!/usr/bin/env bash
# The session's last GPU call when little device time is left (issues 40 and 42): lesson 7's
# bench entries at the public call, merged into docs/benchmarks.json, then verify.sh's
# grading, masters and quick bench (no suite) under one deadline. From the repo root:
#     FINAL_COMMIT=<sha> bash .whl/on-device.sh bash tools/gpu/final_call.sh
# Brings back benchmarks.json and .md, the tensorcore bench log, gpu_run.json, summary.txt
# and verify's logs.tgz. Knobs: FINAL_BENCH_S (100), FINAL_VERIFY_S (270).
set -uo pipefail
OUT=${OUT:-.}
export GIT_DIR=/nonexistent PYTHONUNBUFFERED=1
CUDACOURSE_DEVICE=gpu CUDACOURSE_QUIET=1 CUDACOURSE_BENCH_PROG="python3 -m cudacourse.bench" \
  timeout ${FINAL_BENCH_S:-100} python3 -m cudacourse.bench --no-progress \
  --only tensorcore_matmul,tensorcore_attention --json docs/benchmarks.json \
  --markdown docs/benchmarks.md --merge > $OUT/tcbench.log 2>&1
echo "tensorcore bench rc=$?" >> $OUT/tcbench.log
cp docs/benchmarks.json docs/benchmarks.md $OUT/ 2>/dev/null
VERIFY_COMMIT=${FINAL_COMMIT:-unknown} VERIFY_STAGES="grading masters bench" \
  VERIFY_DEADLINE=${FINAL_VERIFY_S:-270} bash tools/gpu/verify.sh > $OUT/verify.log 2>&1
echo "verify rc=$?" >> $OUT/verify.log
tail -25 $OUT/tcbench.log; tail -40 $OUT/verify.log
