#!/usr/bin/env bash
# Issue 22 on the GPU, one call: the GPU tests of the prepared launch path, the public calls
# timed as users time them (with and without the prepared path, PyTorch and cuBLAS beside
# them: tools/probe_calls.py), Nsight Compute counters for attention d = 64 / 128, matmul,
# the stencil and the LBM step (tools/probe_ncu.py), then the bench on the public kernels
# (BENCH_ARGS; SWEEP=1 adds the full-size stencil and LBM sweeps). From the repo root:
#     bash .whl/on-device.sh bash tools/gpu/perf.sh
# Writes $OUT/tests.log, $OUT/probe_calls.json, $OUT/ncu.csv, $OUT/bench.json and logs.
set -uo pipefail
OUT=${OUT:-.}
export PYTHONUNBUFFERED=1 CUDACOURSE_DEVICE=gpu
NCU=/usr/local/cuda/bin/ncu
stamp() { echo "$(date -u +%T) $*" >> $OUT/steps.log; }
stamp start
timeout ${TESTS_S:-30} python3 -m pytest -v -p no:cacheprovider -m gpu \
  ${TESTS:-tests/test_launch.py tests/test_numba_private.py tests/test_vector.py} > $OUT/tests.log 2>&1
echo "pytest rc=$?" >> $OUT/tests.log; stamp tests
timeout ${CALLS_S:-30} python3 tools/probe_calls.py > $OUT/calls.log 2>&1; stamp calls
timeout ${NCU_S:-35} $NCU --clock-control none --kernel-name-base mangled \
  -k 'regex:_make_fast_kernel|_make_register|_make_rows[^_]|_lbm_fused' \
  --launch-skip 5 --launch-count 5 --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --csv --page details \
  python3 tools/probe_ncu.py > $OUT/ncu.csv 2> $OUT/ncu.err; stamp ncu
if [ "${SWEEP:-0}" = 1 ]; then
  CUDACOURSE_BENCH_PROG="python3 -m cudacourse.bench" timeout ${SWEEP_S:-45} python3 -m cudacourse.bench \
    --no-progress --only stencil,lbm --json $OUT/sweep.json > $OUT/sweep.log 2>&1; stamp sweep
fi
CUDACOURSE_BENCH_PROG="python3 -m cudacourse.bench" timeout ${BENCH_S:-25} python3 -m cudacourse.bench \
  --no-progress ${BENCH_ARGS:---size small --only vector_add,reduce_sum,transpose,softmax,matmul,attention,stencil,lbm} \
  --json $OUT/bench.json > $OUT/bench.log 2>&1; stamp bench
tail -2 $OUT/tests.log; cat $OUT/steps.log
