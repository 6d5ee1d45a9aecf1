#!/usr/bin/env bash
# The per-exercise wrong-kernel catalogue (issue #11) on the H200: every test_check_* file,
# GPU mode; the per-exercise files (vector, threads, memory, tiling, attention) have no
# sim_only skips (the engine's own files keep a few, about the simulator itself). Wrong kernels whose mistake a GPU cannot see
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
    tests/test_check_*.py \
    > "$OUT/checks_catalogue.log" 2>&1
rc=$?
echo "checks_catalogue: pytest exit $rc in $(( $(date +%s) - start )) s" | tee -a "$OUT/checks_catalogue.log"
tail -60 "$OUT/checks_catalogue.log"
exit "$rc"
