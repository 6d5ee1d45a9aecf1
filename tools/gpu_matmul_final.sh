#!/usr/bin/env bash
# Pick the fastest correct matmul variant on this GPU, make it "best", then run the full
# benchmark (so matmul_best_vs_cublas is measured with the final choice). GPU machine only.
set -uo pipefail
export CUDACOURSE_DEVICE=gpu PYTHONUNBUFFERED=1
mkdir -p "$OUT/docs"
python3 -m cudacourse.bench --no-progress --only matmul --json /tmp/matmul.json > /tmp/matmul.txt 2>&1
grep -E "matmul|SGEMM" /tmp/matmul.txt
best=$(python3 - <<'PY'
import json
r = json.load(open("/tmp/matmul.json"))["ratios"]
v = {k[len("matmul_"):-len("_vs_cublas")]: x for k, x in r.items()
     if k.startswith("matmul_") and k.endswith("_vs_cublas") and x and k != "matmul_best_vs_cublas"}
print(max(v, key=v.get))
PY
)
echo "fastest correct variant: $best"
sed -i "s/^BEST = \"register128x256\"/BEST = \"$best\"/" src/cudacourse/matmul.py
grep '^BEST' src/cudacourse/matmul.py
(cd "$OUT" && python3 -m cudacourse.bench --no-progress --json docs/benchmarks.json \
   --markdown docs/benchmarks.md --plot docs/benchmarks.png > bench.txt 2>&1); tail -32 "$OUT/bench.txt"
python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_matmul.py 2>&1 | tail -3
