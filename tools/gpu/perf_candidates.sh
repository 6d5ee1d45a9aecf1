#!/usr/bin/env bash
# Issue 35 on the GPU, one call (from the tree's root, or a copy of it anywhere):
#     bash .whl/on-device.sh bash tools/gpu/perf_candidates.sh
# 1. tools/probe_candidates.py: the candidate kernels timed beside the present ones, each checked;
# 2. tools/choose_candidates.py: the fastest correct of each, as a CUDACOURSE_CHOICES file;
# 3. the full bench with those choices: docs/benchmarks.{json,md,png} (copied to $OUT);
# 4. Nsight Compute counters of each chosen kernel (and the one it replaces), one process per
#    kernel family so that a family cut short by the deadline leaves the others' CSVs.
# Every step has a deadline inside DEADLINE_S (seconds from the start), so the call ends in time.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-.}
export PYTHONUNBUFFERED=1 CUDACOURSE_DEVICE=${CUDACOURSE_DEVICE:-gpu}
NCU=/usr/local/cuda/bin/ncu
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-415}
left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }
stamp() { echo "$(date -u +%T) +$(( $(date +%s) - T0 ))s $*" >> $OUT/steps.log; }
stamp "start in $PWD, python $(python3 -c 'import cudacourse, sys; print(cudacourse.__file__)')"
PROBE_BUDGET_S=${PROBE_BUDGET_S:-80} timeout ${PROBE_S:-105} python3 tools/probe_candidates.py \
  > $OUT/probe.log 2>&1; stamp "probe rc=$?"
python3 tools/choose_candidates.py $OUT/probe_candidates.json > $OUT/choices.json 2>> $OUT/probe.log
stamp "choices rc=$? $(tr -d '\n ' < $OUT/choices.json)"
export CUDACOURSE_CHOICES=$OUT/choices.json
mkdir -p docs
CUDACOURSE_BENCH_PROG="python -m cudacourse.bench" timeout $(( $(left) - ${NCU_RESERVE_S:-60} )) \
  python3 -m cudacourse.bench --no-progress ${BENCH_ARGS:-} --json docs/benchmarks.json \
  --markdown docs/benchmarks.md --plot docs/benchmarks.png > $OUT/bench.log 2>&1
stamp "bench rc=$?"
cp docs/benchmarks.json docs/benchmarks.md docs/benchmarks.png $OUT/ 2>/dev/null
for fam in ${NCU_FAMILIES:-stencil lbm matmul attention transpose}; do
  t=$(( $(left) - 5 ))
  [ $t -lt 15 ] && { stamp "ncu $fam skipped (deadline)"; continue; }
  PROBE_NCU=1 PROBE_ONLY=$fam timeout $t $NCU --clock-control none --kernel-name-base mangled \
    -k 'regex:_make_fast_kernel|_make_register|_make_rows|_lbm_fused|_make_tiled' \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats \
    --section InstructionStats --csv --page details \
    python3 tools/probe_candidates.py > $OUT/ncu_$fam.csv 2> $OUT/ncu_$fam.err
  stamp "ncu $fam rc=$?"
done
cd $OUT && tar czf ncu.tgz ncu_*.csv ncu_manifest_*.json probe_candidates_ncu_*.json 2>/dev/null
tar czf logs.tgz steps.log probe.log bench.log ncu_*.err 2>/dev/null
rm -f ncu_*.csv ncu_manifest_*.json probe_candidates_ncu_*.json ncu_*.err probe.log bench.log
cat steps.log
