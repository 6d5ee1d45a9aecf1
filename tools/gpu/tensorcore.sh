#!/usr/bin/env bash
# Issue 40 (lesson 7's engine) on the H200, one call of at most 8.5 minutes: the GPU tests of the
# tensor-core intrinsics and kernels (the simulator's fragment layouts against the hardware),
# the tile sweep (tools/gpu/tune_tensorcore.py), the bench entries merged into
# docs/benchmarks.json (bring it back from $OUT), and Nsight Compute's counters for the
# course's kernels and PyTorch's. From the repo root:
#     bash .whl/on-device.sh bash tools/gpu/tensorcore.sh
# Writes $OUT/tests.log, $OUT/tune.json, $OUT/benchmarks.json, $OUT/bench.log, $OUT/ncu.csv.
set -uo pipefail
OUT=${OUT:-.}
export PYTHONUNBUFFERED=1 CUDACOURSE_DEVICE=gpu CUDACOURSE_QUIET=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
stamp() { echo "$(date -u +%T) $*" >> $OUT/steps.log; }
stamp start
timeout ${TESTS_S:-90} python3 -m pytest -q -p no:cacheprovider tests/test_tensorcore.py \
  tests/test_matmul_mma.py tests/test_attention_mma.py tests/test_cases_tensorcore.py \
  > $OUT/tests.log 2>&1
echo "pytest rc=$?" >> $OUT/tests.log; stamp tests
timeout ${TUNE_S:-220} python3 tools/gpu/tune_tensorcore.py $OUT/tune.json full $OUT/tc_configs.json \
  > $OUT/tune.log 2>&1
stamp tune
[ -s $OUT/tc_configs.json ] && export CUDACOURSE_TC_CONFIGS=$OUT/tc_configs.json
cp docs/benchmarks.json $OUT/benchmarks.json
CUDACOURSE_BENCH_PROG="python3 -m cudacourse.bench" timeout ${BENCH_S:-110} python3 -m cudacourse.bench \
  --no-progress --only tensorcore_matmul,tensorcore_attention --json $OUT/benchmarks.json --merge \
  > $OUT/bench.log 2>&1; stamp bench
timeout ${NCU_S:-90} $NCU --clock-control none --kernel-name-base mangled \
  -k 'regex:matmul_mma|attention_mma|gemm|fmha|flash|cudnn|sm90' --launch-skip 2 --launch-count 16 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --csv --page details python3 tools/gpu/ncu_tensorcore.py > $OUT/ncu.csv 2> $OUT/ncu.err
stamp ncu
tail -3 $OUT/tests.log; cat $OUT/bench.log | tail -15; cat $OUT/steps.log
