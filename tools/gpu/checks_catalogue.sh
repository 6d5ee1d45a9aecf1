#!/usr/bin/env bash
# The per-exercise wrong-kernel catalogue (issue #11) on the H200: every test_check_* file,
# GPU mode, no sim_only skips in these files. Wrong kernels whose mistake a GPU cannot see
# (warp UB, divergent barriers, shared-memory races, one thread doing all the work, k/v
# read from global memory) are judged by each checker's simulator replay (check/_replay),
# so they must FAIL the check here too, with the same diagnosis as in the simulator.
# Run from the repo root after the wheels are in place:
#     bash .whl/on-device.sh bash tools/gpu/checks_catalogue.sh
# Writes $OUT/checks_catalogue.log (pytest -rfEs, 25 slowest) and $OUT/checks_catalogue.xml
# (junit). Expect: 0 failed; skipped only the tests marked gpu-less by reason (none in these
# files) -- any "passed" wrong kernel shows up as a failed test_*_rejects.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CUDACOURSE_DEVICE=gpu PYTHONUNBUFFERED=1
start=$(date +%s)
timeout ${CATALOGUE_TIMEOUT:-540} python3 -m pytest -q -n 8 -p no:cacheprovider -rfEs \
    --durations=25 --junitxml="$OUT/checks_catalogue.xml" \
    tests/test_check_vector.py tests/test_check_threads.py tests/test_check_memory.py \
    tests/test_check_tiling.py tests/test_check_attention.py \
    > "$OUT/checks_catalogue.log" 2>&1
rc=$?
echo "checks_catalogue: pytest exit $rc in $(( $(date +%s) - start )) s" | tee -a "$OUT/checks_catalogue.log"
tail -60 "$OUT/checks_catalogue.log"
exit "$rc"
