#!/usr/bin/env bash
# One batched session on a GPU machine, from the repository root:
#   bash tools/gpu_session.sh [probe] [tests] [bench] [grading] [tests_and_grading]
# (no steps: probe tests bench grading). On the offline H200 machine prefix it with
# `bash .whl/on-device.sh`: the wheelhouse that ../shared/gpu/wheelhouse.sh writes (not part
# of this repository; see shared/gpu/README.md).
# Writes logs and results under $OUT (at most 8 files come back: notebooks are tarred).
set -uo pipefail
FINAL=${OUT:-$PWD/.gpu-out}; mkdir -p "$FINAL"
# Only 8 files come back from the device machine: collect everything here, tar it at the end.
OUT=/tmp/gpu-session; rm -rf "$OUT"; mkdir -p "$OUT"
trap '(cd "$OUT" && tar czf "$FINAL/results.tar.gz" .); cp "$OUT/session.log" "$FINAL/"' EXIT
export CUDACOURSE_DEVICE=gpu PYTHONUNBUFFERED=1
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/session.log"; }
steps=${*:-probe tests bench grading}
for step in $steps; do
  t0=$(date +%s)
  case $step in
    probe)
      log "probe_vector"
      timeout 200 python3 tools/probe_vector.py --json "$OUT/probe_vector.json" > "$OUT/probe_vector.txt" 2>&1
      tail -25 "$OUT/probe_vector.txt" ;;
    tests)
      log "test suite, GPU mode, executed notebooks kept"
      rm -rf /tmp/nb; mkdir -p /tmp/nb
      CUDACOURSE_NB_OUT=/tmp/nb timeout ${TESTS_TIMEOUT:-330} python3 -m pytest -q -p no:cacheprovider -n 6 \
        --durations=15 -rfEs tests > "$OUT/pytest_gpu.log" 2>&1
      echo "pytest exit $?" >> "$OUT/pytest_gpu.log"
      tail -45 "$OUT/pytest_gpu.log"
      mkdir -p "$OUT/notebooks" && cp /tmp/nb/*.ipynb "$OUT/notebooks/" ;;
    bench)
      log "benchmark"
      mkdir -p "$OUT/docs"
      (cd "$OUT" && timeout 300 python3 -m cudacourse.bench --no-progress \
         --json docs/benchmarks.json --markdown docs/benchmarks.md --plot docs/benchmarks.png) \
         > "$OUT/bench.txt" 2>&1
      tail -40 "$OUT/bench.txt" ;;
    tests_and_grading)
      log "test suite (-v, per-test timeout) and the grading check, side by side"
      rm -rf /tmp/nb; mkdir -p /tmp/nb "$OUT/grading"
      (CUDACOURSE_NB_OUT=/tmp/nb timeout ${TESTS_TIMEOUT:-330} python3 -m pytest -v -p no:cacheprovider \
        -n 8 --timeout 150 --durations=20 -rfEs tests --ignore=tests/test_grading.py \
        > "$OUT/pytest_gpu.log" 2>&1; echo "pytest exit $?" >> "$OUT/pytest_gpu.log") &
      (OUT="$OUT/grading" GRADING_TIMEOUT=15 timeout ${GRADING_CAP:-240} bash tools/gpu_grading_check.sh \
        > "$OUT/grading.txt" 2>&1; echo "grading exit $?" >> "$OUT/grading.txt") &
      wait
      mkdir -p "$OUT/notebooks" && cp /tmp/nb/*.ipynb "$OUT/notebooks/" 2>/dev/null
      grep -E "FAILED|ERROR|Timeout|passed|failed" "$OUT/pytest_gpu.log" | tail -30
      tail -25 "$OUT/grading.txt" ;;
    grading)
      log "autograding the sample submissions"
      mkdir -p "$OUT/grading"
      OUT="$OUT/grading" timeout 240 bash tools/gpu_grading_check.sh > "$OUT/grading.txt" 2>&1
      tail -30 "$OUT/grading.txt" ;;
  esac
  log "$step took $(( $(date +%s) - t0 )) s"
done
