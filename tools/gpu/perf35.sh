#!/usr/bin/env bash
# Issue 35 on the GPU, one call: the candidate kernels timed beside the current ones and their
# peers (tools/probe_issue35.py: $OUT/probe_issue35.json), then Nsight Compute counters of
# every one of them at full size ($OUT/ncu.csv, the launches named in $OUT/ncu_manifest.json).
# From the repo root:
#     bash .whl/on-device.sh bash tools/gpu/perf35.sh
set -uo pipefail
OUT=${OUT:-.}
export PYTHONUNBUFFERED=1 CUDACOURSE_DEVICE=gpu
NCU=/usr/local/cuda/bin/ncu
stamp() { echo "$(date -u +%T) $*" >> $OUT/steps.log; }
stamp start
PROBE_BUDGET_S=${PROBE_BUDGET_S:-150} timeout ${PROBE_S:-190} python3 tools/probe_issue35.py \
  > $OUT/probe.log 2>&1; stamp "probe rc=$?"
PROBE_NCU=1 timeout ${NCU_S:-170} $NCU --clock-control none --kernel-name-base mangled \
  -k 'regex:_make_fast_kernel|_make_register|_make_rows|_lbm_fused|_make_tiled' \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats \
  --section SchedulerStats --csv --page details \
  python3 tools/probe_issue35.py > $OUT/ncu.csv 2> $OUT/ncu.err; stamp "ncu rc=$?"
cat $OUT/steps.log
