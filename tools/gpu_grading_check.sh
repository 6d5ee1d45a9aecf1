#!/usr/bin/env bash
# Autograde lesson 1's sample submissions on this machine and compare with the expected
# scores, which are the same in the simulator (tests/test_grading.py asserts them there).
# Meant for a GPU machine, from the repository root:
#
#     bash tools/gpu_grading_check.sh
#
# (on the offline H200 machine: `bash .whl/on-device.sh bash tools/gpu_grading_check.sh`,
# with the wheelhouse that ../shared/gpu/wheelhouse.sh writes; it is not in this repository).
# Prints each sample's score, writes $OUT/grading_scores.json (scores, expectations, the
# kernel's device line, per-cell errors and stderr of graded cells), $OUT/autograde.log and
# the autograded notebooks of two samples. It also grades the correct sample once more with
# stock nbgrader Execute, to test the hypothesis that stderr output (Numba warnings on a
# GPU) is what cost a correct submission its points there. Exit status 1 on any difference.
# About 2-3 minutes on an H200 (two cells there wait out the per-cell timeout on purpose).
set -uo pipefail

ROOT=$PWD
OUT=${OUT:-$ROOT/.gpu-grading-out}
mkdir -p "$OUT"
TIMEOUT=${GRADING_TIMEOUT:-30}
A=01_gpu_vs_cpu
COURSE=$(mktemp -d /tmp/gradecheck.XXXXXX)
STOCK=$(mktemp -d /tmp/gradecheck-stock.XXXXXX)
PY=${PYTHON:-python3}
start=$(date +%s)

echo "== grading check: $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo 'no nvidia-smi')"
echo "== python $($PY -c 'import sys; print(sys.executable)'), nbgrader $(nbgrader --version 2>/dev/null | tail -1)"
jupyter kernelspec list 2>/dev/null | sed 's/^/   /'

for dir in "$COURSE" "$STOCK"; do
  mkdir -p "$dir/solutions"
  cp -r "$ROOT/solutions/$A" "$dir/solutions/$A"
  cp "$ROOT/nbgrader_config.py" "$dir/"
done
# The stock course: nbgrader's own Execute for autograde (the config registers ours).
cat >> "$STOCK/nbgrader_config.py" <<'EOF'

from nbconvert.preprocessors import ClearMetadataPreprocessor as _C
from nbgrader.preprocessors import (AssignLatePenalties as _L, CheckCellMetadata as _M,
                                    Execute as _X, IgnorePattern as _I, LimitOutput as _O,
                                    SaveAutoGrades as _S)
c.Autograde.autograde_preprocessors = [_X, _I, _C, _O, _S, _L, _M]
EOF

(cd "$COURSE" && nbgrader generate_assignment $A --force --db "sqlite:///$COURSE/gradebook.db" \
   --log-level=ERROR) || { echo "generate_assignment failed"; exit 1; }
(cd "$STOCK" && nbgrader generate_assignment $A --force --db "sqlite:///$STOCK/gradebook.db" \
   --log-level=ERROR) || { echo "generate_assignment (stock) failed"; exit 1; }
$PY "$ROOT/tests/submissions/samples.py" "$COURSE" >/dev/null || { echo "samples failed"; exit 1; }
mkdir -p "$STOCK/submitted/correct_stock/$A"
cp "$COURSE/submitted/correct/$A/$A.ipynb" "$STOCK/submitted/correct_stock/$A/"

echo "== autograde (ResilientExecute, per-cell timeout ${TIMEOUT}s)"
(cd "$COURSE" && nbgrader autograde $A --force --db "sqlite:///$COURSE/gradebook.db" \
   --ResilientExecute.timeout="$TIMEOUT") >"$OUT/autograde.log" 2>&1
echo "   exit $?; $(grep -c 'cudacourse-grading:' "$OUT/autograde.log") grader log lines"
grep 'cudacourse-grading:' "$OUT/autograde.log" | sed 's/^.*cudacourse-grading: /   /' | cut -c1-300

echo "== autograde (stock nbgrader Execute), correct sample only"
(cd "$STOCK" && nbgrader autograde $A --force --db "sqlite:///$STOCK/gradebook.db" \
   --Execute.timeout=240) >"$OUT/autograde_stock.log" 2>&1
echo "   exit $?"

COURSE="$COURSE" STOCK="$STOCK" OUT="$OUT" A="$A" $PY - <<'PY'
import json, os, sys
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

course, stock, out = (Path(os.environ[k]) for k in ("COURSE", "STOCK", "OUT"))
a = os.environ["A"]
want = json.loads((course / "expected.json").read_text())


def scores(root, student):
    with Gradebook(f"sqlite:///{root}/gradebook.db") as gb:
        try:
            nb = gb.find_submission_notebook(a, a, student)
        except Exception as exc:  # noqa: BLE001
            return None, str(exc)
        return {g.name: g.score for g in nb.grades}, ""


def cells(root, student):
    path = root / "autograded" / student / a / f"{a}.ipynb"
    if not path.exists():
        return {"missing": str(path)}
    nb = nbformat.read(path, 4)
    res = {}
    for c in nb.cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        if c.cell_type != "code" or not gid:
            continue
        errs = [f"{o.ename}: {o.evalue}"[:600] for o in c.outputs if o.output_type == "error"]
        stderr = [o.text[:600] for o in c.outputs if o.output_type == "stream"
                  and (o.name == "stderr" or o.text.startswith("(stderr)"))]
        if errs or stderr:
            res[gid] = {"errors": errs, "stderr": stderr}
    return res


report = {"samples": {}, "ok": True}
print(f"{'sample':24} {'got':>5} {'want':>5}")
for name, w in want.items():
    got, why = scores(course, name)
    total = sum(got.values()) if got else None
    same = got == w["cells"]
    report["ok"] &= same
    report["samples"][name] = {"got": got, "want": w["cells"], "total": total,
                               "want_total": w["total"], "same": same, "why": why,
                               "cells": cells(course, name)}
    print(f"{name:24} {total if total is not None else '-':>5} {w['total']:>5g}  "
          f"{'OK' if same else 'DIFF'}")
    if not same:
        for gid, v in (got or {}).items():
            if v != w["cells"].get(gid):
                print(f"    {gid}: got {v}, want {w['cells'].get(gid)}: "
                      f"{report['samples'][name]['cells'].get(gid)}")
got, why = scores(stock, "correct_stock")
report["stock_correct"] = {"got": got, "why": why, "cells": cells(stock, "correct_stock"),
                           "want": want["correct"]["cells"]}
print(f"{'correct (stock Execute)':24} {sum(got.values()) if got else '-':>5} "
      f"{want['correct']['total']:>5g}  (stock nbgrader, for the diagnosis)")
for gid, v in report["stock_correct"]["cells"].items():
    print(f"    {gid}: {json.dumps(v)[:400]}")
log = (out / "autograde.log").read_text()
report["device_lines"] = [l.split("cudacourse-grading: ", 1)[1] for l in log.splitlines()
                          if "cudacourse-grading:" in l and "NUMBA_ENABLE_CUDASIM" in l][:2]
(out / "grading_scores.json").write_text(json.dumps(report, indent=1))
sys.exit(0 if report["ok"] else 1)
PY
status=$?
for s in correct crashes; do
  cp "$COURSE/autograded/$s/$A/$A.ipynb" "$OUT/autograded_$s.ipynb" 2>/dev/null
done
cp "$STOCK/autograded/correct_stock/$A/$A.ipynb" "$OUT/autograded_correct_stock.ipynb" 2>/dev/null
echo "== done in $(( $(date +%s) - start )) s; exit $status; results in $OUT/grading_scores.json"
exit $status
