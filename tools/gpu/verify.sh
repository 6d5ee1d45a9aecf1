#!/usr/bin/env bash
# One GPU call that proves the committed course on the H200 and writes docs/gpu_run.json:
#
#   1. the whole test suite in GPU mode (xdist sized to the machine, --dist loadgroup as
#      ./course test runs it: each class a test session builds is built once, by one worker),
#      started first: it is the longest stage, and the record needs it complete;
#   2. the sample class of lesson 1 graded by `cudacourse grade` with the DEFAULT options
#      (workers, timeouts, sandbox: bubblewrap, which .whl/on-device.sh puts on PATH), after
#      three of its samples graded one at a time on the reserved cores (the latency of a
#      submission on its worker: the goal);
#   3. every master of both editions executed whole, with per-cell times: the English ones
#      one at a time on the reserved cores (their times and their check cells' are the
#      lessons' goals, measured as a learner runs them), the Japanese ones beside the suite,
#      one at a time too (their code cells are the English ones, test_i18n_translations;
#      they must pass; the suite validates only their graded part);
#   4. the benchmark's quick subset (--size small, one case per kernel family), reserved cores.
# Cores: VERIFY_RESERVE (default 2 of 8 or more) are reserved for what is timed against a
# learner's goal (the latency probe, the English masters, the bench); the suite, the class and
# the Japanese masters share the others (taskset), the class and the Japanese masters at a
# lower priority than the suite (nice). The record says "masters_alone": true then (false
# without reserved cores while other stages run: the check-cell goal is then not proven).
# All of it fits in one call of 10 minutes with a minute to spare (VERIFY_GRADING_ALONE=1
# grades the class first, alone, at the cost of the suite's time). The suite skips the
# masters' tests of tests/test_notebooks.py, which stage 3 is (suite.deselected says so);
# suite.slowest lists its slowest tests, the first to make cheaper.
#
# From the repository root of a clean copy of the committed tree, on the GPU machine:
#
#     VERIFY_COMMIT=$(git rev-parse HEAD) ... bash .whl/on-device.sh bash tools/gpu/verify.sh
#
# (prepared here with `bash ../shared/gpu/wheelhouse.sh matplotlib-fontja==1.1.0`: the Japanese
# plots' font is not on the GPU image; the project's command there is `python3 -m cudacourse.cli`,
# as the package has no top-level cudacourse_cli module any more)
#
# (the device copy has no .git: the commit measured comes from VERIFY_COMMIT; run from a git
# checkout, the script takes HEAD and refuses a dirty tree). Every stage has a hard deadline
# inside VERIFY_DEADLINE (default 500 s; with on-device.sh's set-up the call stays under 540 s),
# so the record is always written, saying what did not
# finish. Writes docs/gpu_run.json in the tree and, under $OUT (what comes back):
# gpu_run.json, summary.txt, logs.tgz (pytest log and junit XML, grading run record and
# log, per-master JSON with per-cell times, bench JSON and log). Exit status: 0 when the record
# meets every goal of issues 21 and 34 (`python -m cudacourse.course.gpu_run check`), 1 when it misses one,
# 2 when the tree or the commit was refused.
#
# Simulator mode, to prove this script's paths without a GPU (CPU machines, CI):
#     VERIFY_SIM=1 bash tools/gpu/verify.sh
# runs a tiny subset: CUDACOURSE_DEVICE=sim, three samples graded (VERIFY_SAMPLES), lesson 1 only
# (both editions), two small test files, no bench (it needs CUDA events). Knobs (all optional):
#   VERIFY_STAGES="grading suite masters bench"   VERIFY_LESSONS="01_gpu_vs_cpu ..."
#   VERIFY_LESSONS_JA="..." (default: those of VERIFY_LESSONS with a Japanese master)
#   VERIFY_SUITE_ARGS="tests"   VERIFY_SAMPLES="correct ..."   VERIFY_GRADING_S=300   VERIFY_BENCH_S=90
#   VERIFY_LATENCY=0 (no latency probe)   VERIFY_LATENCY_SAMPLES="correct wrong_kernel blank"
#   VERIFY_BENCH_ONLY=copy,...   VERIFY_XDIST=N   VERIFY_ALLOW_DIRTY=1 (records COMMIT-dirty)
#   VERIFY_RESERVE=N (cores reserved for the timed stages; 0: none)
#   VERIFY_RECORD=PATH (default docs/gpu_run.json)   VERIFY_DEADLINE=500   VERIFY_TEST_TIMEOUT=300
set -uo pipefail
ROOT=$PWD
T0=$(date +%s)
PY=${PYTHON:-python3}
# a relative path breaks where stages cd (absolute, but not resolved: a venv's python is a link)
case $PY in /*) ;; */*) PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY") ;; esac
OUT=${OUT:-$ROOT/.verify-out}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/verify.XXXXXX)
PARTS=$WORK/parts
LOGS=$WORK/logs
mkdir -p "$PARTS" "$LOGS"
DEADLINE=${VERIFY_DEADLINE:-500}
RECORD=${VERIFY_RECORD:-$ROOT/docs/gpu_run.json}
CORES=$(nproc)
export PYTHONUNBUFFERED=1 CUDACOURSE_QUIET=1
# pytest and nbgrader run in other directories: PYTHONPATH entries must be absolute
export PYTHONPATH=$(echo "${PYTHONPATH:-}" | tr ':' '\n' | while read -r p; do [ -n "$p" ] && readlink -f "$p"; done | paste -sd:)

# Wheels installed with `pip --target` (.whl/on-device.sh) put their data files, nbconvert's
# templates among them, under <target>/share/jupyter, which Jupyter does not search: without
# it `nbgrader generate_feedback` fails ("No template sub-directory with name 'classic'").
for site in $(echo "$PYTHONPATH" | tr ':' ' '); do
  [ -d "$site/share/jupyter/nbconvert/templates" ] && export JUPYTER_PATH=$site/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}
done

left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
say() { echo "== $(date -u +%T) +$(( $(date +%s) - T0 ))s $*" | tee -a "$OUT/summary.txt"; }
min() { [ "$1" -lt "$2" ] && echo "$1" || echo "$2"; }

if [ -n "${VERIFY_SIM:-}" ]; then
  MODE=sim
  export CUDACOURSE_DEVICE=sim
  STAGES=${VERIFY_STAGES:-grading suite masters}
  LESSONS=${VERIFY_LESSONS:-01_gpu_vs_cpu}
  SUITE_ARGS=${VERIFY_SUITE_ARGS:-tests/test_gpu_run.py tests/test_device.py tests/test_device_matrix.py}
  SAMPLES=${VERIFY_SAMPLES:-correct wrong_kernel invalid_json}
  LATENCY_SAMPLES=${VERIFY_LATENCY_SAMPLES:-correct wrong_kernel}
else
  MODE=gpu
  export CUDACOURSE_DEVICE=gpu
  STAGES=${VERIFY_STAGES:-grading suite masters bench}
  LESSONS=${VERIFY_LESSONS:-$($PY -c "from cudacourse.course.lessons import LESSONS; print(' '.join(l.stem for l in LESSONS))")}
  SUITE_ARGS=${VERIFY_SUITE_ARGS:-tests}
  SAMPLES=${VERIFY_SAMPLES:-}
  LATENCY_SAMPLES=${VERIFY_LATENCY_SAMPLES:-correct wrong_kernel blank}
fi
has() { case " $STAGES " in *" $1 "*) return 0 ;; esac; return 1; }

if [ -z "${VERIFY_LESSONS_JA+set}" ]; then
  LESSONS_JA=$(for stem in $LESSONS; do [ -f "solutions/ja/$stem/$stem.ipynb" ] && echo "$stem"; done | paste -sd' ')
else
  LESSONS_JA=$VERIFY_LESSONS_JA
fi
# --- cores: reserved for what is timed against a learner's goal, the rest for the others ---
# (the CPUs this process may use, by id: a container's may not start at 0)
CPUS=($($PY -c "import os; print(*sorted(os.sched_getaffinity(0)))" 2>/dev/null || seq 0 $(( CORES - 1 ))))
RESERVE=${VERIFY_RESERVE:-$(( ${#CPUS[@]} >= 8 ? 2 : 0 ))}
# taskset (util-linux), else the same through Python: `PIN CPUS COMMAND...`
if command -v taskset >/dev/null 2>&1; then PIN=(taskset -c)
else PIN=("$PY" -c 'import os, sys; os.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(",")}); os.execvp(sys.argv[2], sys.argv[2:])'); fi
ALONE=() BESIDE=() LOWER=(nice -n 5) MASTERS_ALONE=false
if [ "$RESERVE" -gt 0 ] && [ "$RESERVE" -lt "${#CPUS[@]}" ]; then
  cpus() { echo "$@" | tr ' ' ','; }
  RES_CPUS=$(cpus "${CPUS[@]:0:$RESERVE}")
  ALONE=("${PIN[@]}" "$RES_CPUS")
  BESIDE=("${PIN[@]}" "$(cpus "${CPUS[@]:$RESERVE}")")
  LOWER=("${BESIDE[@]}" nice -n 5)
  MASTERS_ALONE=true
else
  RESERVE=0
  # nothing beside the English masters: they ran alone all the same
  [ -z "$(echo "$STAGES" | tr ' ' '\n' | grep -vx masters)" ] && [ -z "$LESSONS_JA" ] && MASTERS_ALONE=true
fi
SHARED_CORES=$(( ${#CPUS[@]} - RESERVE ))
: > "$OUT/summary.txt"

# --- what is measured: the commit, and a clean tree -------------------------------------
COMMIT=${VERIFY_COMMIT:-}
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  head=$(git -C "$ROOT" rev-parse HEAD)
  if [ -n "$COMMIT" ] && [ "$COMMIT" != "$head" ] && [ "${COMMIT#"$head"}" = "$COMMIT" ]; then
    echo "verify: VERIFY_COMMIT=$COMMIT but this checkout is at $head" >&2; exit 2
  fi
  COMMIT=$head
  # (the record this script writes, and its default $OUT, do not make the tree dirty)
  dirty=$(git -C "$ROOT" status --porcelain --untracked-files=normal -- . \
            ':!docs/gpu_run.json' ':!.verify-out')
  if [ -n "$dirty" ]; then
    if [ -z "${VERIFY_ALLOW_DIRTY:-}" ]; then
      echo "verify: refusing a dirty tree (the record must be of a commit); commit or stash:" >&2
      echo "$dirty" | head -20 >&2; exit 2
    fi
    COMMIT=$COMMIT-dirty
  fi
fi
[ -z "$COMMIT" ] && echo "verify: WARNING: no VERIFY_COMMIT and no .git: the record's commit is 'unknown' (its check fails)" >&2

GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
[ "$MODE" = sim ] && GPU=${GPU:-none (Numba CUDA simulator)} && DRIVER=${DRIVER:-none}
$PY - "$WORK/meta.json" "$MODE" "$CORES" "${COMMIT:-unknown}" "${GPU:-unknown}" "${DRIVER:-unknown}" "$STAGES" "$MASTERS_ALONE" "$RESERVE" <<'PY'
import json, os, platform, sys, time
from importlib.metadata import version
path, mode, cores, commit, gpu, driver, stages, alone, reserve = sys.argv[1:10]
v = {}
for pkg in ("numpy", "numba", "numba-cuda", "nbgrader", "nbclient", "pytest", "cupy-cuda13x"):
    try:
        v[pkg] = version(pkg)
    except Exception:
        pass
json.dump({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpu": gpu,
           "driver": driver, "commit": commit, "mode": mode, "cores": int(cores),
           "python": platform.python_version(), "versions": v, "stages": stages.split(),
           "concurrent": not os.environ.get("VERIFY_GRADING_ALONE"),
           "masters_alone": alone == "true", "reserved_cores": int(reserve)},
          open(path, "w"))
PY
say "verify: $MODE mode on ${GPU:-?} (driver ${DRIVER:-?}), $CORES cores ($RESERVE reserved: CPUs ${RES_CPUS:-none}), commit ${COMMIT:-unknown}; stages: $STAGES"

finish() {
  trap - EXIT
  local suite_pid=${SUITE_PID:-}
  if [ -n "$suite_pid" ] && kill -0 "$suite_pid" 2>/dev/null; then
    say "suite still running at the end: stopping it"; kill -INT "$suite_pid" 2>/dev/null; sleep 10
  fi
  # Lessons asked for but never run (deadline) are in the record as not passed.
  local ja_pid=${JA_PID:-}
  if [ -n "$ja_pid" ] && kill -0 "$ja_pid" 2>/dev/null; then
    say "Japanese masters still running at the end: stopping them"
    pkill -P "$ja_pid" 2>/dev/null; kill "$ja_pid" 2>/dev/null
  fi
  for stem in $( has masters && echo "$LESSONS"); do
    [ -f "$PARTS/lesson-$stem.json" ] || echo '{"seconds": 0, "passed": false, "slowest_check_s": null, "error": "not run: the verify deadline came first", "cells": []}' > "$PARTS/lesson-$stem.json"
  done
  for stem in $( has masters && echo "$LESSONS_JA"); do
    [ -f "$PARTS/lesson-ja-$stem.json" ] || echo '{"seconds": 0, "passed": false, "slowest_check_s": null, "error": "not run: the verify deadline came first", "cells": []}' > "$PARTS/lesson-ja-$stem.json"
  done
  if [ -f "$LOGS/suite.started" ] && [ ! -f "$PARTS/suite.json" ]; then
    $PY -m cudacourse.course.gpu_run suite "$LOGS/pytest.xml" --log "$LOGS/pytest.log" \
      --seconds $(( $(date +%s) - $(cat "$LOGS/suite.started") )) --out "$PARTS/suite.json" >/dev/null 2>&1
  fi
  $PY -m cudacourse.course.gpu_run assemble "$PARTS" --out "$RECORD" \
    --meta-json "$WORK/meta.json" --meta "seconds=$(( $(date +%s) - T0 ))" 2>&1 | tee -a "$OUT/summary.txt"
  cp "$RECORD" "$OUT/gpu_run.json" 2>/dev/null
  $PY -m cudacourse.course.gpu_run check "$RECORD" > "$WORK/check.txt" 2>&1
  local check=$?
  tail -30 "$WORK/check.txt" | tee -a "$OUT/summary.txt"
  cp -r "$PARTS" "$LOGS/parts" 2>/dev/null
  tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
  say "verify done in $(( $(date +%s) - T0 )) s: $OUT/gpu_run.json"
  exit $(( check == 0 ? 0 : 1 ))  # 0: the record proves the course; 1: see its goals_missed
}
trap finish EXIT

# --- 1. the suite, first, in the background ------------------------------------------------
if has suite; then
  # the shared cores less the grading jobs' share (they overlap the suite)
  NX=${VERIFY_XDIST:-$(( SHARED_CORES > 8 ? SHARED_CORES - 2 : (SHARED_CORES > 1 ? SHARED_CORES : 0) ))}
  SUITE_S=$(( $(left) - 35 ))
  # Each master is executed alone below (stage 3), with per-cell times: not twice.
  DESELECT=()
  # (both master tests share one execution of each master by nbgrader validate: stage 3
  # executes each master alone instead, with per-cell times; CI validates them in the simulator)
  has masters && DESELECT=(--deselect tests/test_notebooks.py::test_master_executes_without_errors
                           --deselect tests/test_notebooks.py::test_master_passes_nbgrader_validate)
  NOTE=()
  [ ${#DESELECT[@]} -gt 0 ] && NOTE=(--deselected "${DESELECT[1]} (each master is executed alone by verify.sh: lessons)"
                                     --deselected "${DESELECT[3]} (the same execution, by nbgrader validate; validated in CI in the simulator)")
  DIST=()
  [ "$NX" -gt 0 ] && DIST=(--dist loadgroup)  # tests/conftest.py: SHARED
  say "suite: pytest -n $NX ${DIST[*]} $SUITE_ARGS ${DESELECT[*]} (deadline $SUITE_S s)"
  date +%s > "$LOGS/suite.started"
  ( "${BESIDE[@]}" timeout -s INT -k 20 "$SUITE_S" $PY -m pytest -q -n "$NX" "${DIST[@]}" -p no:cacheprovider -rfE \
      --timeout="${VERIFY_TEST_TIMEOUT:-300}" --durations=40 --junitxml="$LOGS/pytest.xml" \
      "${DESELECT[@]}" $SUITE_ARGS \
      > "$LOGS/pytest.log" 2>&1
    echo "pytest exit $?" >> "$LOGS/pytest.log"
    $PY -m cudacourse.course.gpu_run suite "$LOGS/pytest.xml" --log "$LOGS/pytest.log" \
      --seconds $(( $(date +%s) - $(cat "$LOGS/suite.started") )) "${NOTE[@]}" --out "$PARTS/suite.json" ) &
  SUITE_PID=$!
fi

# --- 2. the sample class, graded on the defaults -----------------------------------------
CLASS=$WORK/class
A1=01_gpu_vs_cpu
setup_class() {  # the class's course: the release, the samples, expected.json
  local budget
  budget=$(min "${VERIFY_GRADING_S:-360}" $(( $(left) - 40 )))
  mkdir -p "$CLASS/solutions" && cp -r "solutions/$A1" "$CLASS/solutions/" && cp nbgrader_config.py "$CLASS/"
  # (seconds on a GPU machine; minutes on a loaded 2-core one)
  if ! { (cd "$CLASS" && "${BESIDE[@]}" timeout "$budget" $PY -m nbgrader generate_assignment "$A1" --force \
          --db="sqlite:///$CLASS/gradebook.db" > "$LOGS/generate.log" 2>&1) &&
         "${BESIDE[@]}" timeout "$budget" $PY tests/submissions/samples.py "$CLASS" > "$LOGS/samples.log" 2>&1; }; then
    say "grading: could not set up the class (see generate.log, samples.log)"; return 1
  fi
  # a subset (simulator mode): these samples and their expectations
  if [ -n "$SAMPLES" ] && ! $PY - "$CLASS" "$SAMPLES" <<'PY'
import json, shutil, sys
from pathlib import Path
course, names = Path(sys.argv[1]), sys.argv[2].replace(",", " ").split()
want = json.loads((course / "expected.json").read_text())
keep = [n for n in names if n in want]
for d in (course / "submitted").iterdir():
    if d.name not in keep:  # (a hostile sample may be a symbolic link: removed, not followed)
        d.unlink() if d.is_symlink() or not d.is_dir() else shutil.rmtree(d)
(course / "expected.json").write_text(json.dumps({k: want[k] for k in keep}, indent=1))
print("kept samples:", keep)
PY
  then say "grading: could not keep the samples $SAMPLES"; return 1; fi
}

# One submission at a time, on the reserved cores (beside the suite, which has the others):
# the seconds a lesson-1 submission takes on its worker (the goal), which the class graded
# beside the suite cannot tell (VERIFY_LATENCY=0 skips it: about 30 s on the H200).
latency_probe() {
  local l0 lrc
  l0=$(date +%s)
  say "grading: latency, $LATENCY_SAMPLES one at a time, ${ALONE[*]:+on the reserved cores, }beside no other grading"
  "${ALONE[@]}" timeout -k 15 "$(min 120 $(( $(left) - 60 )))" $PY -m cudacourse.cli grade "$A1" --course "$CLASS" \
    --workers 1 --no-progress $(for n in $LATENCY_SAMPLES; do echo "--student $n"; done) \
    > "$LOGS/latency.log" 2>&1
  lrc=$?
  $PY - "$CLASS/grading/$A1/latest.json" "$lrc" "$(( $(date +%s) - l0 ))" "$PARTS/latency.json" <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import json, sys
path, rc, wall, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
try:
    run = json.load(open(path))
except Exception as exc:  # noqa: BLE001 - stopped, or failed before writing
    run = {"results": [], "error": str(exc)}
per = {r["student"]: r.get("seconds") for r in run.get("results", []) if r.get("status") == "graded"}
secs = sorted(float(v) for v in per.values() if v is not None)
json.dump({"students": per, "median_s": secs[len(secs) // 2] if secs else None,
           "workers": 1, "exit_status": rc, "wall_seconds": wall}, open(out, "w"), indent=1)
print(f"grading latency: {per} (median {secs[len(secs) // 2] if secs else None} s), exit {rc}")
PY
  rm -rf "$CLASS/grading" "$CLASS/autograded" "$CLASS/.cudacourse-grading"  # the class's run starts clean
}

grade_class() {
  local budget g0
  g0=$(date +%s)
  budget=$(min "${VERIFY_GRADING_S:-360}" $(( $(left) - 40 )))
  say "grading: the sample class of $A1 with the default options (deadline $budget s)"
  "${LOWER[@]}" timeout -k 15 "$budget" $PY -m cudacourse.cli grade "$A1" --course "$CLASS" --no-progress \
    > "$LOGS/grade.log" 2>&1
  local grc=$?
  say "grading: cudacourse grade exit $grc in $(( $(date +%s) - g0 )) s (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  $PY -m cudacourse.course.gpu_run grading "$CLASS" "$A1" --wall $(( $(date +%s) - g0 )) --exit-status "$grc" \
    --out "$PARTS/grading.json" 2>&1 | tee -a "$OUT/summary.txt"
  cp -r "$CLASS/grading" "$LOGS/grading" 2>/dev/null
}
if has grading && setup_class; then
  [ "${VERIFY_LATENCY:-1}" != 0 ] && latency_probe
  if [ -n "${VERIFY_GRADING_ALONE:-}" ]; then
    grade_class  # alone on the machine: honest seconds, less time for the rest
  else
    grade_class &  # beside the suite and the masters: all of it fits in one call
    GRADING_PID=$!
  fi
fi

# --- 3. every master, per-cell times ------------------------------------------------------
# run_master EDITION STEM: solutions/[ja/]STEM executed whole; its part lesson-[ja-]STEM.json
run_master() {
  local ed=$1 stem=$2 nb part tag budget m0 rc
  if [ "$ed" = ja ]; then nb=solutions/ja/$stem/$stem.ipynb part=$PARTS/lesson-ja-$stem.json tag="ja/$stem"
  else nb=solutions/$stem/$stem.ipynb part=$PARTS/lesson-$stem.json tag=$stem; fi
  budget=$(min 200 $(( $(left) - 30 )))
  if [ "$budget" -lt 20 ]; then say "master $tag: skipped, the deadline is near"; return; fi
  m0=$(date +%s)
  local where=("${ALONE[@]}")  # English: the reserved cores, as a learner runs it
  [ "$ed" = ja ] && where=("${LOWER[@]}")
  "${where[@]}" timeout -k 10 "$budget" $PY -m cudacourse.course.gpu_run master "$nb" --out "$part" \
    --timeout "$(min 150 "$budget")" > "$LOGS/master-${tag//\//-}.log" 2>&1
  rc=$?
  if [ ! -f "$part" ]; then
    printf '{"seconds": %d, "passed": false, "slowest_check_s": null, "error": "stopped at its deadline of %d s (exit %d)", "cells": []}\n' \
      $(( $(date +%s) - m0 )) "$budget" "$rc" > "$part"
  fi
  say "master $([ "$ed" = ja ] && echo ja/)$(tail -1 "$LOGS/master-${tag//\//-}.log")"
}
if has masters; then
  if [ -n "$LESSONS_JA" ]; then
    # last lesson first: the two editions of one lesson (the same kernels) never share the GPU
    ( for stem in $(echo "$LESSONS_JA" | tr ' ' '\n' | tac); do run_master ja "$stem"; done ) &
    JA_PID=$!
  fi
  for stem in $LESSONS; do run_master en "$stem"; done
fi

# --- 4. the benchmark's quick subset -------------------------------------------------------
if has bench; then
  budget=$(min "${VERIFY_BENCH_S:-90}" $(( $(left) - 30 )))
  if [ "$budget" -ge 20 ]; then
    only=${VERIFY_BENCH_ONLY:-copy,vector_add,reduce_sum,transpose,matmul,attention,stencil,lbm}
    b0=$(date +%s)
    CUDACOURSE_BENCH_PROG="python3 -m cudacourse.bench" "${ALONE[@]}" timeout -k 10 "$budget" \
      $PY -m cudacourse.bench --size small --only "$only" --no-progress --json "$LOGS/bench.json" \
      > "$LOGS/bench.log" 2>&1
    brc=$?
    $PY - "$LOGS/bench.json" "$brc" "$(( $(date +%s) - b0 ))" "$only" "$PARTS/bench.json" <<'PY'
import json, sys
path, rc, secs, only, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
try:
    rep = json.load(open(path))
except Exception as exc:  # noqa: BLE001 - stopped, or failed before writing
    rep = {"error": f"no bench JSON ({exc})"}
json.dump({"size": "small", "only": only.split(","), "exit_status": rc, "seconds": secs,
           "ratios": rep.get("ratios"), "error": rep.get("error")}, open(out, "w"), indent=1)
PY
    say "bench (small: $only): exit $brc in $(( $(date +%s) - b0 )) s"
  else
    say "bench: skipped, the deadline is near"
  fi
fi

if [ -n "${JA_PID:-}" ]; then
  say "waiting for the Japanese masters ($(left) s left)"
  wait "$JA_PID"
fi
if [ -n "${GRADING_PID:-}" ]; then
  say "waiting for the grading ($(left) s left)"
  wait "$GRADING_PID"
fi
if [ -n "${SUITE_PID:-}" ]; then
  say "waiting for the suite ($(left) s left)"
  wait "$SUITE_PID"
  say "suite: $(grep -E 'passed|failed|error' "$LOGS/pytest.log" | tail -1)"
  grep -E "^(FAILED|ERROR) " "$LOGS/pytest.log" | head -40 >> "$OUT/summary.txt"
fi
# finish (the EXIT trap) assembles the record
