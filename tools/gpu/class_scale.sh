#!/usr/bin/env bash
# Class-scale grading throughput (issue #14, #21): grade N submissions of an assignment (A,
# default lesson 1: right, wrong kernel, blank, hostile, in turn; any other lesson: the
# master's answers and blank ones, in turn, or KINDS="correct") with every CPU core as a
# worker, through `cudacourse grade` on a Dask LocalCluster, and print submissions per minute
# so that 200 submissions can be extrapolated. From the repository root:
#
#     bash .whl/on-device.sh bash tools/gpu/class_scale.sh          # N=40, WORKERS=nproc
#     A=04_shared_memory N=40 bash .whl/on-device.sh bash tools/gpu/class_scale.sh
#     A=04_shared_memory N=2 WORKERS=2 LOCAL=0 bash tools/gpu/class_scale.sh   # simulator
#
# Writes $OUT/class_scale.json (throughput, per-submission seconds, slowest, scores by
# kind), $OUT/grade.log and $OUT/summary.txt. Needs dask and distributed in the wheelhouse;
# without them it says so and uses cudacourse grade's thread executor instead.
# Budget: under 3 minutes for N=40 on 16 cores (one lesson-1 submission is a few seconds of
# verdict processes); GRADE_LIMIT (default 150 s) stops the run and reports what finished.
set -uo pipefail

ROOT=$PWD
OUT=${OUT:-$ROOT/.gpu-class-scale-out}
mkdir -p "$OUT"
N=${N:-40}
WORKERS=${WORKERS:-$(nproc)}
TIMEOUT=${GRADING_TIMEOUT:-30}
LIMIT=${GRADE_LIMIT:-150}
A=${A:-01_gpu_vs_cpu}
PY=${PYTHON:-python3}
COURSE=$(mktemp -d /tmp/classscale.XXXXXX)
export CUDACOURSE_QUIET=1

echo "== class scale: $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo 'no nvidia-smi'), $(nproc) cores, N=$N, workers=$WORKERS"
mkdir -p "$COURSE/solutions"
cp -r "$ROOT/solutions/$A" "$COURSE/solutions/$A"
cp "$ROOT/nbgrader_config.py" "$COURSE/"
(cd "$COURSE" && $PY -m nbgrader generate_assignment "$A" --force \
   --db="sqlite:///$COURSE/gradebook.db" >"$OUT/generate.log" 2>&1) \
  || { echo "generate_assignment failed:"; tail -20 "$OUT/generate.log"; exit 1; }

# N submissions: the kinds in turn (lesson 1's as tests/test_grader_distributed.py builds them).
$PY - "$COURSE" "$N" "$A" "${KINDS:-}" <<'PY'
import copy, sys
from pathlib import Path
import nbformat
course, n, A = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
learner = nbformat.read(course / "notebooks" / A / f"{A}.ipynb", 4)
master = nbformat.read(course / "solutions" / A / f"{A}.ipynb", 4)
answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in master.cells
           if c.metadata.get("nbgrader", {}).get("solution")}
WRONG = ("@cuda.jit\ndef vector_add(a, b, out):\n    i = cuda.grid(1)\n"
         "    if i < out.shape[0]:\n        out[i] = a[i] - b[i]\n")
ATTACK = "\nimport numpy as np\nnp.allclose = lambda *a, **k: True\n"
kinds = sys.argv[4].split() or (["correct", "wrong_kernel", "blank", "hostile"]
                                 if A == "01_gpu_vs_cpu" else ["correct", "blank"])
for i in range(n):
    kind = kinds[i % len(kinds)]
    nb = copy.deepcopy(learner)
    cells = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and not meta.get("grade_id"):
            continue
        if meta.get("solution") and kind != "blank":
            cell.source = answers[meta["grade_id"]]
            if meta["grade_id"] == "vector_add" and kind != "correct":
                cell.source = WRONG + (ATTACK if kind == "hostile" else "")
        cells.append(cell)
    nb.cells = cells
    dest = course / "submitted" / f"s{i:03d}_{kind}" / A
    dest.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest / f"{A}.ipynb")
print(f"wrote {n} submissions")
PY

if [ "${LOCAL:-1}" != 0 ] && $PY -c "import distributed" 2>/dev/null; then
  EXEC=(--local-cluster "$WORKERS")
  HOW="Dask LocalCluster of $WORKERS worker processes"
else
  EXEC=()
  HOW="cudacourse grade's thread executor ($WORKERS threads): distributed is NOT in the wheelhouse"
fi
echo "== grading with $HOW"
start=$(date +%s.%N)
timeout "$LIMIT" $PY -m cudacourse.cli grade "$A" --course "$COURSE" --workers "$WORKERS" \
  --timeout "$TIMEOUT" --no-progress "${EXEC[@]}" >"$OUT/grade.log" 2>&1
rc=$?
end=$(date +%s.%N)
echo "== cudacourse grade exit status $rc (124: stopped at GRADE_LIMIT=$LIMIT s)"
$PY - "$COURSE" "$start" "$end" "$rc" "$HOW" "$OUT" "$A" <<'PY'
import json, statistics, sys
from pathlib import Path
course, start, end, rc, how, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], Path(sys.argv[6])
A = sys.argv[7]
wall = end - start
latest = Path(course) / "grading" / A / "latest.json"
run = json.loads(latest.read_text()) if latest.exists() else {"results": []}
res = run["results"]
graded = [r for r in res if r.get("status") == "graded"]
secs = {r["student"]: float(r.get("seconds") or 0) for r in res}
by_kind = {}
for r in graded:
    by_kind.setdefault(r["student"].split("_", 1)[1], set()).add(sum((r.get("scores") or {}).values()))
summary = {
    "submissions": len(res), "graded": len(graded), "wall_seconds": round(wall, 1),
    "per_minute": round(60 * len(res) / wall, 2) if wall > 0 else None,
    # the grader's own clock: from the first job to the last gradebook write (no start-up)
    "grade_seconds": run.get("seconds"),
    "per_minute_grading": round(60 * len(res) / run["seconds"], 2) if run.get("seconds") else None,
    "per_submission_median_s": round(statistics.median(secs.values()), 2) if secs else None,
    "slowest": sorted(secs.items(), key=lambda kv: -kv[1])[:5],
    "scores_by_kind": {k: sorted(v) for k, v in by_kind.items()},
    "executor": how, "exit_status": rc, "isolation": run.get("isolation"),
    # start-up is paid once: extrapolate with the grader's own clock
    "minutes_for_200": round(200 * (run.get("seconds") or wall) / len(res) / 60, 1) if res else None,
}
(out / "class_scale.json").write_text(json.dumps(summary, indent=1))
lines = [f"{summary['submissions']} submissions ({summary['graded']} graded) in {wall:.1f} s on {how}:",
         f"  {summary['per_minute']} submissions/minute with start-up; {summary['per_minute_grading']} over the grader's own {summary['grade_seconds']} s",
         f"  median {summary['per_submission_median_s']} s per submission (on its worker)",
         f"  slowest: {summary['slowest'][:3]}",
         f"  scores by kind (each kind must have ONE score): {summary['scores_by_kind']}",
         f"  extrapolated: 200 submissions in about {summary['minutes_for_200']} min at this rate"]
(out / "summary.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
tail -5 "$OUT/grade.log"
