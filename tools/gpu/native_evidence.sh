#!/usr/bin/env bash
# Issue 20, GPU half: native evidence (check/_instrument) on the H200, in one short run.
# In parallel, to fit one device call: lessons 4 and 5's masters executed (nbclient,
# tools/time_cells.py: per-cell seconds) and the engine tests and wrong-kernel catalogues in
# GPU mode (pytest -n 8, -v so that a run cut short still says what passed). Run from the
# repo root after the wheels are in place:
#     bash .whl/on-device.sh bash tools/gpu/native_evidence.sh
# Writes $OUT/env.txt, cells_l4.json, cells_l5.json, nb.log, pytest.log, junit.xml.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CUDACOURSE_DEVICE=gpu PYTHONUNBUFFERED=1
LIMIT=${NATIVE_LIMIT:-140}
{ date -u; nvidia-smi -L; ls -l /usr/local/cuda/bin/compute-sanitizer; nproc; } > "$OUT/env.txt" 2>&1
start=$(date +%s)
timeout "$LIMIT" python3 tools/time_cells.py "$OUT/cells_l5.json" \
    solutions/05_fused_attention/05_fused_attention.ipynb > "$OUT/nb5.log" 2>&1 &
p5=$!
timeout "$LIMIT" python3 tools/time_cells.py "$OUT/cells_l4.json" \
    solutions/04_shared_memory/04_shared_memory.ipynb > "$OUT/nb4.log" 2>&1 &
p4=$!
timeout "$LIMIT" python3 -m pytest -v -n 8 -p no:cacheprovider -rfEs --durations=30 \
    --junitxml="$OUT/junit.xml" tests/test_instrument.py tests/test_check_replay.py \
    tests/test_check_vector.py tests/test_check_tiling.py tests/test_check_attention.py \
    tests/test_check_threads.py tests/test_check_engine.py tests/test_check_science.py \
    tests/test_check_memory.py > "$OUT/pytest.log" 2>&1
echo "pytest exit $? after $(( $(date +%s) - start )) s" >> "$OUT/pytest.log"
wait $p5; echo "lesson 5 exit $? after $(( $(date +%s) - start )) s" >> "$OUT/nb5.log"
wait $p4; echo "lesson 4 exit $? after $(( $(date +%s) - start )) s" >> "$OUT/nb4.log"
cat "$OUT/nb4.log" "$OUT/nb5.log" > "$OUT/nb.log"
grep -E "passed|failed|FAILED|ERROR" "$OUT/pytest.log" | tail -40
cat "$OUT/nb.log"
