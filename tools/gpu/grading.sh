#!/usr/bin/env bash
# Grade lesson 1's sample class on the GPU machine with `cudacourse grade`, in bubblewrap when
# it works there (carried as .whl/bwrap, or on PATH), else in the documented fallback; record
# which. Run from the repository root after the wheels are installed:
#
#     bash .whl/on-device.sh bash tools/gpu/grading.sh
#
# Writes under $OUT: grading_gpu.txt (the log: sandbox probe, GPU probe in the sandbox, the
# summary table, the comparison with the expected scores), grading_gpu.json (the run record
# plus expected scores and the comparison), and grading_gpu_files.tgz (status.csv, two
# autograded notebooks). Exit status 1 when any sample got other than its expected result.
# Budget: under 3 minutes on an H200 (16 cores: 8 workers).
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-$ROOT/.gpu-grading-out}
mkdir -p "$OUT"
LOG=$OUT/grading_gpu.txt
exec > >(tee "$LOG") 2>&1
A=01_gpu_vs_cpu
PY=${PYTHON:-python3}
export PYTHONPATH=$(echo "${PYTHONPATH:-}" | tr ':' '\n' | while read -r p; do [ -n "$p" ] && readlink -f "$p"; done | paste -sd:)
export CUDACOURSE_DEVICE=${CUDACOURSE_DEVICE:-gpu}
start=$(date +%s)
echo "== grading on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), $(date -u +%FT%TZ), uid $(id -u)"

# --- which sandbox: a carried bwrap first (its libraries: libselinux, libcap, libpcre2) -----
BWRAP=""
if [ -f .whl/bwrap ]; then
  cp .whl/bwrap /tmp/bwrap && chmod 755 /tmp/bwrap && BWRAP=/tmp/bwrap
  ldd /tmp/bwrap | sed 's/^/   ldd: /'
  if ldd /tmp/bwrap | grep -q "not found" && [ -d .whl/bwrap-lib ]; then
    # libraries carried beside it (Debian 12's libselinux, libcap, libpcre2)
    cp -r .whl/bwrap-lib /tmp/bwrap-lib
    printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/bwrap-lib exec /tmp/bwrap "$@"\n' > /tmp/bwrap-run
    chmod 755 /tmp/bwrap-run && BWRAP=/tmp/bwrap-run
    echo "   (with the carried libraries: $BWRAP)"
  fi
elif command -v bwrap >/dev/null; then
  BWRAP=$(command -v bwrap)
fi
echo "== bwrap: ${BWRAP:-none} $([ -n "$BWRAP" ] && $BWRAP --version 2>&1)"
export CUDACOURSE_BWRAP=$BWRAP
$PY - <<'PY'
import json, os, sys
from cudacourse.grader import sandbox as sb
box = sb.Sandbox(bwrap=os.environ.get("CUDACOURSE_BWRAP") or None)
ok, why = sb.isolation(box)
print("== sandbox:", "bwrap" if ok else f"NOT isolated: {why}")
print("== privileges:", sb.privilege_note() or "not root")
# The GPU inside the sandbox: a kernel launched by a sandboxed process, with the limits on.
code = ("import cudacourse, numpy as np; from numba import cuda\n"
        "@cuda.jit\ndef k(x):\n    i = cuda.grid(1)\n    if i < x.shape[0]: x[i] = 2 * i\n"
        "d = cuda.to_device(np.zeros(1000, np.float32)); k[4, 256](d)\n"
        "print('mode', cudacourse.MODE, 'ok', bool((d.copy_to_host() == 2 * np.arange(1000)).all()),"
        " getattr(cuda.get_current_device(), 'name', 'no name (simulator)'))")
work = "/tmp/gpu-probe"; os.makedirs(work, exist_ok=True)
works = []
for mem in (4096, None):
    box.limits.memory_mb = mem
    r = sb.run([sys.executable, "-c", code], workdir=work, sb=box, course_root="/nonexistent",
               timeout=120)
    print(f"== GPU in the sandbox (memory limit {mem} MiB as RLIMIT_DATA): rc {r.rc}, "
          f"{r.isolation}: {r.stdout.decode().strip()[-300:]} {r.stderr.decode().strip()[-600:]}")
    if r.rc == 0 and b"ok True" in r.stdout:
        works.append(mem or 0)
open("/tmp/gpu-probe/memory_mb", "w").write(str(works[0] if works else 4096))
PY
MEM=$(cat /tmp/gpu-probe/memory_mb 2>/dev/null || echo 4096)
echo "== memory limit used for the class: ${MEM} MiB (0 = none)"

# --- the sample class --------------------------------------------------------------------
COURSE=$(mktemp -d /tmp/gpu-grading.XXXXXX)
mkdir -p "$COURSE/solutions" && cp -r solutions/$A "$COURSE/solutions/" && cp nbgrader_config.py "$COURSE/"
(cd "$COURSE" && $PY -m nbgrader generate_assignment $A --force --db=sqlite:///$COURSE/gradebook.db >/dev/null 2>&1) \
  || echo "== generate_assignment FAILED"
$PY tests/submissions/samples.py "$COURSE" | tail -3
SBOPT=""
[ -z "$BWRAP" ] && SBOPT="--sandbox fallback"
# a carried bwrap is found as <course>/.whl/bwrap
[ -n "$BWRAP" ] && mkdir -p "$COURSE/.whl" && cp "$BWRAP" "$COURSE/.whl/bwrap"
t0=$(date +%s)
$PY -m cudacourse_cli grade $A --course "$COURSE" --workers 8 --timeout 20 --no-progress --memory-mb "$MEM" $SBOPT \
  2> "$OUT/grading_gpu_stderr.txt"
echo "== cudacourse grade: rc $?, $(( $(date +%s) - t0 )) s"
grep -c "cudacourse-grading:" "$OUT/grading_gpu_stderr.txt" | sed 's/^/== incident lines: /'
sleep 5
$PY - "$COURSE" "$OUT" <<'PY'
import json, sys
from pathlib import Path
course, out = Path(sys.argv[1]), Path(sys.argv[2])
want = json.loads((course / "expected.json").read_text())
run = json.loads((course / "grading" / "01_gpu_vs_cpu" / "latest.json").read_text())
got = {r["student"]: r for r in run["results"]}
bad = []
for name, w in want.items():
    r = got.get(name, {})
    if w["not_graded"]:
        ok = r.get("status") == "not_graded" and w["not_graded"] in (r.get("reason") or "")
    else:
        ok = r.get("status") == "graded" and r.get("scores") == w["cells"]
    print(f"{'ok ' if ok else 'BAD'} {name:22} want {w['total'] if w['total'] is not None else 'not graded'}"
          f"  got {r.get('status')} {sum((r.get('scores') or {}).values()) if r.get('scores') else ''}"
          f" {(r.get('reason') or '')[:60]}")
    if not ok:
        bad.append({"name": name, "want": w, "got": r})
run["expected"], run["mismatches"] = want, bad
(out / "grading_gpu.json").write_text(json.dumps(run, indent=1, default=str))
print(f"== {len(want) - len(bad)} of {len(want)} samples as expected; sandbox {run['isolation']}")
sys.exit(1 if bad else 0)
PY
rc=$?
tar czf "$OUT/grading_gpu_files.tgz" -C "$COURSE" grading autograded/correct autograded/forge_displayhook 2>/dev/null
echo "== done in $(( $(date +%s) - start )) s, rc $rc"
exit $rc
