#!/usr/bin/env bash
# The check engine's tests on the H200 (issue #11): structured failures, the detector, the
# course's own kernels refused, compile errors in words from the REAL compile, and the
# simulator-only checks re-run in a simulator subprocess from a GPU parent.
# Run from the repo root after the wheels are in place:
#     bash .whl/on-device.sh bash tools/gpu/checks_engine.sh
# Writes $OUT/checks_engine.log (pytest -rA: every test's outcome, skips with their reason,
# and the "[timing]" lines). Expect: 0 failed; skipped = the sim_only tests (each says why)
# and the offline GPU-mode test (no nvidia-nvvm wheel on the image: it is the GPU run's
# job). Finishes in well under 2 minutes (each replay child ~1-2 s).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CUDACOURSE_DEVICE=${CUDACOURSE_DEVICE:-gpu}  # =sim for a dry run without a GPU
python3 - <<'PY' 2>&1 | tee "$OUT/checks_engine.log"
import cudacourse
from cudacourse.check import _compile
print("mode", cudacourse.MODE, "| sm_90 gate (simulator only):", _compile.status())
PY
start=$(date +%s)
timeout 170 python3 -m pytest -q -rA -s -p no:cacheprovider \
    tests/test_check_engine.py tests/test_check_compile.py tests/test_check_replay.py \
    2>&1 | tee -a "$OUT/checks_engine.log"
rc=${PIPESTATUS[0]}
echo "checks_engine: pytest exit $rc in $(( $(date +%s) - start )) s" | tee -a "$OUT/checks_engine.log"
exit "$rc"
