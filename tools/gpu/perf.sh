#!/usr/bin/env bash
# Issue 22 on the GPU, one call: the public calls timed as users time them (with and without
# the prepared launch path, PyTorch and cuBLAS beside them), Nsight Compute counters for
# attention d = 64 / 128, matmul, the stencil and the LBM step, the stencil and LBM sweeps,
# then the GPU tests of the prepared path. From the repo root:
#     bash .whl/on-device.sh bash tools/gpu/perf.sh
# Writes $OUT/probe_calls.json, $OUT/ncu.csv, $OUT/sweep.json and logs.
set -uo pipefail
OUT=${OUT:-.}
export PYTHONUNBUFFERED=1 CUDACOURSE_DEVICE=gpu
NCU=/usr/local/cuda/bin/ncu
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/smi.log 2>&1
timeout ${CALLS_S:-55} python3 tools/probe_calls.py > $OUT/calls.log 2>&1
timeout ${NCU_S:-60} $NCU --clock-control none \
  -k 'regex:_make_fast_kernel|_make_register|_make_rows[^_]|_lbm_fused' \
  --launch-skip 5 --launch-count 5 --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --csv --page details \
  python3 tools/probe_ncu.py > $OUT/ncu.csv 2> $OUT/ncu.err
if [ "${SWEEP:-1}" = 1 ]; then
  CUDACOURSE_BENCH_PROG="python3 -m cudacourse.bench" timeout ${SWEEP_S:-45} python3 -m cudacourse.bench \
    --no-progress --only stencil,lbm --json $OUT/sweep.json > $OUT/sweep.log 2>&1
fi
timeout ${TESTS_S:-60} python3 -m pytest -q -p no:cacheprovider -m gpu ${TESTS:-tests/test_launch.py tests/test_bench.py} \
  > $OUT/tests.log 2>&1
${EXTRA:-true}
tail -3 $OUT/tests.log
