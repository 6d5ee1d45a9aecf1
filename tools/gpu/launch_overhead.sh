#!/usr/bin/env bash
# Launch overhead on the GPU machine: microseconds per call from Python on one-element arrays,
# the course launcher (vector_add on CuPy and on Numba arrays) against a bare Numba launch,
# CuPy's add and PyTorch's add; then the GPU tests of the prepared-launch path. Under a minute.
# From the repository root, after `bash ../shared/gpu/wheelhouse.sh` has written .whl/:
#     bash .whl/on-device.sh bash tools/gpu/launch_overhead.sh
# Writes $OUT/launch_overhead.json ({JSON key: us}), $OUT/launch_overhead.txt and
# $OUT/launch_tests.log. The goal line says whether launch_overhead_us is at most 20.
set -uo pipefail
OUT=${OUT:-.}
export CUDACOURSE_DEVICE=gpu PYTHONUNBUFFERED=1
timeout 120 python3 -m cudacourse.bench.cases_launch --json "$OUT/launch_overhead.json" \
  2>&1 | tee "$OUT/launch_overhead.txt"
status=${PIPESTATUS[0]}
timeout 120 python3 -m pytest -q -p no:cacheprovider -rfEs \
  tests/test_numba_private.py tests/test_launch.py tests/test_vector.py tests/test_intrinsics.py \
  tests/test_transpose.py tests/test_reduce.py tests/test_timing.py \
  tests/test_launch_cost.py tests/test_cases_launch.py > "$OUT/launch_tests.log" 2>&1
echo "pytest exit $?" | tee -a "$OUT/launch_tests.log"
tail -15 "$OUT/launch_tests.log"
exit $status
