#!/usr/bin/env bash
# Issue #12 on the H200: lessons 1 and 3 (new streams example, new questions, H200 figures)
# execute on a real GPU, and the quiz tests pass there (Python 3.12).
# Run from the repo root after the wheels are in place:
#     bash .whl/on-device.sh bash tools/gpu/lessons_questions.sh
# Writes $OUT/lessons_questions.log and the executed masters $OUT/0{1,3}_*.ipynb. Expect:
# "executed ok" for both lessons (lesson 3's streams example prints stream 0: [0 1 4 9 16 25],
# stream 1: [100 121 ...], and after squaring the view again elements 2..4 squared twice),
# and 0 failed for the quiz tests. About 1-2 minutes.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CUDACOURSE_DEVICE=gpu
log="$OUT/lessons_questions.log"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_quiz.py tests/test_quiz_bank.py \
    tests/test_quiz_mode.py 2>&1 | tail -5 | tee "$log"
rc=${PIPESTATUS[0]}
for nb in solutions/01_gpu_vs_cpu/01_gpu_vs_cpu.ipynb solutions/03_memory/03_memory.ipynb; do
    name=$(basename "$nb")
    if timeout 100 python3 -m jupyter nbconvert --to notebook --execute \
            --ExecutePreprocessor.timeout=90 --output-dir "$OUT" "$nb" >>"$log" 2>&1; then
        echo "$name: executed ok" | tee -a "$log"
        python3 - "$OUT/$name" <<'PY' | tee -a "$log"
import json, sys
nb = json.load(open(sys.argv[1]))
for c in nb["cells"]:
    text = "".join("".join(o.get("text", "")) for o in c.get("outputs", []))
    if any(k in text for k in ("stream 0:", "after squaring", "break-even", "mode:")):
        print("  " + text.strip().replace("\n", "\n  "))
PY
    else
        echo "$name: FAILED to execute (see above)" | tee -a "$log"
        rc=1
    fi
done
exit "$rc"
