"""The ``cudacourse`` command: doctor, lab, build, bench, quiz-hash, grade."""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from .i18n import LANGUAGES, _


def _v(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def doctor(args: argparse.Namespace) -> int:
    """Describe the environment; exit non-zero with advice when it is broken."""
    os.environ.setdefault("CUDACOURSE_QUIET", "1")
    problems: list[str] = []
    print(f"python        {platform.python_version()} ({sys.executable})")
    for pkg in ("numpy", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "nbgrader",
                "jupyterlab", "matplotlib"):
        print(f"{pkg:<13} {_v(pkg)}")
    from .runtime import device

    bad_numpy = device.numpy_problem()
    if bad_numpy:
        problems.append(bad_numpy)
    gpu, why = device.probe_gpu()
    if gpu:
        cc = ".".join(map(str, gpu.compute_capability))
        print(f"gpu           {gpu.name}")
        print(f"  compute capability {cc}, {gpu.sm_count} SMs, "
              f"{gpu.total_memory / 2**30:.1f} GiB, {gpu.device_count} device(s)")
        print(f"  driver supports CUDA {gpu.driver_version[0]}.{gpu.driver_version[1]}")
        smi = shutil.which("nvidia-smi")
        if smi:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True)
            if out.returncode == 0:
                print(f"  driver version {out.stdout.strip().splitlines()[0]}")
    else:
        print(f"gpu           " + _("none: {why}").format(why=why))
    policy = os.environ.get("CUDACOURSE_DEVICE", "auto")
    try:
        choice = device.ensure(policy) if not bad_numpy else None
    except device.DeviceError as exc:
        problems.append(str(exc))
        choice = None
    if choice is not None:
        print(f"mode          {choice.mode} (CUDACOURSE_DEVICE={policy}: {choice.reason})")
        try:
            from numba import cuda

            if choice.mode == "gpu":
                rt = cuda.runtime.get_version() if hasattr(cuda, "runtime") else "?"
                print(f"  CUDA runtime (numba) {rt}")
                # A first compile proves numba, numba-cuda, numpy and the toolkit fit together.
                import numpy as np

                @cuda.jit
                def _probe(x):
                    x[0] = 42

                d = cuda.to_device(np.zeros(1, np.int32))
                _probe[1, 1](d)
                assert d.copy_to_host()[0] == 42
                print("  " + _("kernel compile and launch: ok"))
            ok, why_cp = device.cupy_usable()
            print("cupy usable   " + (_("yes") if ok else _("no: {why}").format(why=why_cp)))
            if choice.mode == "sim":
                _doctor_sm90(problems)
        except Exception as exc:  # noqa: BLE001 - report whatever broke
            problems.append(_("numba.cuda cannot compile or launch a kernel: {error}").format(
                error=f"{type(exc).__name__}: {exc}"))
    print(f"language      {_lang_line()}")
    if problems:
        print("\n" + _("PROBLEMS:"))
        for p in problems:
            print(f"  - {p}")
        print(_("Fix: run ./course test (it installs the pinned environment), or see "
                "README.md."))
        return 1
    print("\n" + _("all good"))
    return 0


def _lang_line() -> str:
    from . import i18n

    raw = os.environ.get("CUDACOURSE_LANG", "")
    try:
        i18n.normalize(raw)
    except ValueError as exc:
        return _("{problem}; messages are shown in English").format(problem=exc)
    return _("{lang} (CUDACOURSE_LANG={raw}; en or ja)").format(lang=i18n.language(),
                                                               raw=raw or "unset")


def _doctor_sm90(problems: list[str]) -> None:
    """Simulator mode: are learner kernels also compiled for a real GPU (sm_90)?"""
    import time

    from .check import kit

    ok, why = kit.compile_status()
    if not ok:
        print(f"sm_90 compile kernels NOT compiled for a GPU: {why}")
        return
    import numpy as np
    from numba import cuda

    def _probe_sm90(x):
        x[0] = 42

    t0 = time.perf_counter()
    result = kit.compile_kernel(cuda.jit(_probe_sm90), [kit.type_spec(
        np.zeros(1, np.int32))])
    took = time.perf_counter() - t0
    if result.get("ok"):
        regs = result["resources"]["registers"]
        print(f"sm_90 compile yes, kernels are compiled for real before they are simulated "
              f"({why}; probe kernel: {regs} registers, {took:.1f} s)")
    else:
        why = result.get("skipped") or result.get("error", "?")
        print(f"sm_90 compile kernels NOT compiled for a GPU: {why}")
        problems.append(f"the sm_90 compile gate is installed but failed: {why}")


def lab(args: argparse.Namespace) -> int:
    """Open JupyterLab: the learner's workspace, or with ``--instructor`` the course and formgrader.

    Learners get their own copies of the lessons (copied once, never overwritten) and a
    JupyterLab without nbgrader's instructor tools. Instructors get JupyterLab in the course
    root (where ``nbgrader_config.py`` applies), with every tool, opened on formgrader.
    """
    from . import i18n
    from .course.authoring import ROOT
    from .course.workspace import default_workspace, lab_environment, learner_config_dir, sync

    lang = i18n.normalize(args.lang or os.environ.get("CUDACOURSE_LANG"))
    # Kernels inherit it: messages, checkers and questions in the chosen language.
    os.environ["CUDACOURSE_LANG"] = lang
    if args.instructor:
        root, config_dir = Path(args.course).resolve() if args.course else ROOT, None
        # formgrader shows submissions: its pages carry a Content-Security-Policy
        # (cudacourse.grader.pagepolicy), set up by this server configuration.
        # JupyterLab sets the server's default URL to its own (/lab) unless told otherwise:
        # the page a browser opens on "/" is LabApp's default_url.
        policy = Path(__file__).resolve().parent / "grader" / "instructor_server_config.py"
        start = ["--LabApp.default_url=/formgrader", f"--config={policy}"]
    elif lang == i18n.DEFAULT:
        root = sync(Path(args.workspace) if args.workspace else None)
        config_dir, start = learner_config_dir(root), []
    else:  # that edition's learner copies (notebooks/ja/), in a workspace of their own
        edition = ROOT / "notebooks" / lang
        if not any(edition.glob("*/*.ipynb")):
            print(f"cudacourse: no {lang} edition in {edition}: run ./course build", flush=True)
            return 1
        ws = Path(args.workspace) if args.workspace else default_workspace() / lang
        root = sync(ws, edition)
        config_dir, start = learner_config_dir(root), []
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={root}", *start]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers and CI machines often run as root
    cmd += args.rest
    print("cudacourse: opening JupyterLab in", root,
          "(instructor: formgrader)" if args.instructor else "", flush=True)
    # A learner's server runs from the workspace, where the instructors' nbgrader_config.py
    # (course root = the repository) does not apply; an instructor's from the course root.
    os.chdir(root)
    # Become JupyterLab (no child process left behind when this one is stopped), with an
    # environment its kernels may inherit: without the variables this command set for itself.
    os.execve(sys.executable, cmd, lab_environment(dict(os.environ), config_dir))
    return 0  # not reached


def i18n_command(args: argparse.Namespace) -> int:
    """``update``: bring the translation files in line with the English (new entries empty,
    changed ones fuzzy) and compile the message catalogue; ``status``: report, exit 1 when
    anything is missing or stale."""
    from .course.authoring import find_root, lessons
    from .i18n import catalog, translations

    root = find_root()
    bad = 0
    for lesson in lessons(root):
        if not translations.po_path(lesson.stem, args.lang, root).exists():
            print(f"{lesson.stem}: no {args.lang} translation file yet"
                  + (" (update writes one)" if args.action == "status" else ""))
            if args.action == "status":
                bad += 1
                continue
        do = translations.update_file if args.action == "update" else translations.file_status
        st = do(lesson.stem, args.lang, root)
        print(st.describe(lesson.stem))
        bad += not st.ok
    if args.action == "update":
        left = catalog.update(root, args.lang)
    else:
        path = catalog.po_path(root, args.lang)
        left = catalog.untranslated(catalog.read(path)) if path.exists() else ["(no catalogue)"]
    print(f"messages: {len(left)} without a translation" + (": " + "; ".join(left[:10])
                                                            if left else ""))
    return 1 if (bad or left) else 0


def lesson_command(args: argparse.Namespace) -> int:
    """``new NN_topic``: scaffold a lesson's five files; ``check [NN_topic ...]``: every rule
    of :mod:`cudacourse.course.lessonrules` a lesson breaks, with its fix (exit 1 when any)."""
    from .course import lessonrules, scaffold
    from .course.courseroot import find_root

    root = find_root()
    if args.action == "new":
        if len(args.lessons) != 1:
            print("usage: cudacourse lesson new NN_topic [--title TITLE]", file=sys.stderr)
            return 2
        try:
            written = scaffold.new(root, args.lessons[0], args.title)
        except scaffold.ScaffoldError as exc:
            print(f"cudacourse lesson new: {exc}", file=sys.stderr)
            return 1
        for path in written:
            print("wrote", path.relative_to(root))
        n = args.lessons[0][:2]
        print(f"next: edit them, then `cudacourse i18n update` (the Japanese files), "
              f"`cudacourse build {n}`, `cudacourse lesson check {args.lessons[0]}`")
        return 0
    known = lessonrules.stems(root)
    wanted = []
    for name in args.lessons or known:
        match = [s for s in known if s == name or s.split("_")[0] == name]
        if not match:
            print(f"cudacourse lesson check: no lesson {name!r} (lessons: {', '.join(known)})",
                  file=sys.stderr)
            return 2
        wanted += match
    bad = 0
    for stem in wanted:
        problems = lessonrules.check(stem, root)
        print(f"{stem}: " + (f"{len(problems)} rule(s) broken" if problems else "keeps every rule"))
        for problem in problems:
            print("  " + str(problem).replace("\n", "\n  "))
        bad += len(problems)
    return 1 if bad else 0


def build(args: argparse.Namespace) -> int:
    from .course.authoring import build as do_build

    stale = do_build(check_only=args.check, only=args.lessons or None)
    if args.check and stale:
        print("stale (run `./course build`):\n  " + "\n  ".join(stale))
        return 1
    for s in stale:
        print("rebuilt", s)
    print("up to date" if not stale else f"{len(stale)} file(s) rebuilt")
    return 0


def quiz_hash(args: argparse.Namespace) -> int:
    from .course.quiz import answer_hash

    print(answer_hash(args.qid, args.choice))
    return 0


def bench(args: argparse.Namespace) -> int:
    from .bench import main as bench_main

    return bench_main(args.rest)


def collect(args: argparse.Namespace) -> int:
    """``collect-zip`` / ``collect``: 0 when every student was collected, 1 when some were
    refused (each named with the reason), 2 when nothing could be read."""
    from .grader import collect as c
    from .grader import roster as r

    try:
        people = r.find(args.course, args.roster)
        if getattr(args, "file", None):
            zone = None
            if args.archive_times:
                from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

                try:
                    zone = ZoneInfo(args.archive_times)
                except (ZoneInfoNotFoundError, ValueError):
                    raise c.CollectError(f"--archive-times {args.archive_times!r}: not a time "
                                         "zone name (e.g. UTC, Europe/Paris)") from None
            done = c.collect_zip(args.file, args.course, args.assignment, update=args.update,
                                 roster=people, archive_zone=zone)
        else:
            done = c.collect_exchange(args.course, args.assignment, update=args.update,
                                      roster=people)
    except (c.CollectError, r.RosterError) as exc:
        print(f"cudacourse {args.cmd}: {exc}", file=sys.stderr)
        return 2
    from .grader import untrusted

    for line in done.lines():  # names come from learners: one clean line each
        print(untrusted.line(line))
    if done.refused or done.entries:
        return 1
    return 0


def grade(args: argparse.Namespace) -> int:
    """Autograde an assignment: sandboxed, parallel, broken submissions listed as not graded."""
    from .grader import runner, runrecord, sandbox

    options: dict = {"timeout": args.timeout, "feedback_timeout": args.feedback_timeout,
                     "output_cap": args.output_cap,
                     "feedback_run": not args.no_feedback_run,
                     "sandbox": {"mode": args.sandbox, "require": args.require_sandbox,
                                 "limits": {"memory_mb": args.memory_mb or None}}}
    if args.db:
        options["db_url"] = args.db
    from .grader.distributed import default_workers

    args.workers = args.workers or default_workers()
    executor = None
    how = f"{args.workers} {args.executor} worker(s)"
    if args.local_cluster or args.scheduler:  # Dask distributed: one machine or many
        from .grader import distributed

        try:
            executor = distributed.DaskExecutor(distributed.choice_from_args(argparse.Namespace(
                local_cluster=args.local_cluster, scheduler=args.scheduler)))
        except distributed.GradingSetupError as exc:
            print(f"cudacourse grade: {exc}", file=sys.stderr)
            return 2
        how = executor.description
    elif args.executor == "process":
        from concurrent.futures import ProcessPoolExecutor

        executor = ProcessPoolExecutor(max_workers=args.workers)
    elif args.executor != "thread":  # "module:factory", called with the worker count
        import importlib

        mod, _, fn = args.executor.partition(":")
        executor = getattr(importlib.import_module(mod), fn or "make_executor")(args.workers)
    try:
        run = runner.grade_class(args.course, args.assignment, students=args.student or None,
                                 executor=executor, workers=args.workers, options=options,
                                 progress=not args.no_progress, executor_name=how)
    except (sandbox.SandboxRefused, FileNotFoundError) as exc:
        print(f"cudacourse grade: {exc}", file=sys.stderr)
        return 2
    finally:
        if executor is not None:
            executor.shutdown(wait=True)
    print(runrecord.table(run))
    from .grader.distributed import Throughput

    print(Throughput(len(run["results"]), float(run.get("seconds") or 0.0),
                     {r["student"]: float(r.get("seconds") or 0.0) for r in run["results"]},
                     how).summary())
    from .grader import provenance  # what graded this run; whose scores a regrade changed

    try:
        recorded, changed = provenance.record(args.course, args.assignment, args.db,
                                              force=True)
        print(f"provenance: {recorded}")
        if len(provenance.history(args.course, args.assignment)) > 1:
            print(provenance.format_changes(changed))
    except (OSError, LookupError, ValueError) as exc:
        print(f"cudacourse grade: provenance not recorded: {exc}", file=sys.stderr)
    _hand_back(args.course, args.assignment, args.db)
    print(f"\nrun record: {Path(args.course) / 'grading' / args.assignment}/ "
          "(latest.json, status.csv, summary.txt)")
    return 0 if all(r["status"] == "graded" for r in run["results"]) else 1


def _hand_back(course: str, assignment: str, db: str | None) -> bool:
    """The records nbgrader's release_feedback reads, beside each graded copy (handback)."""
    from .grader import handback

    try:
        done = handback.keep(course, assignment, db)
    except (OSError, LookupError, ValueError) as exc:
        print(_("cudacourse: feedback cannot be released yet: {error}").format(
            error=f"{type(exc).__name__}: {exc}"), file=sys.stderr)
        return False
    for line in done.lines():
        print(line)
    return True


def feedback(args: argparse.Namespace) -> int:
    """``nbgrader generate_feedback`` and, with ``--release``, ``release_feedback``, with the
    records release needs written by the grader (:mod:`cudacourse.grader.handback`)."""
    from .grader import course as c

    def run(*step: str) -> bool:
        proc = c.nbgrader(args.course, *step, db=args.db, timeout=3600)
        if proc.returncode != 0:
            print(_("cudacourse feedback: nbgrader {step} failed:").format(step=step[0]),
                  file=sys.stderr)
            print(proc.stderr[-3000:], file=sys.stderr)
        return proc.returncode == 0

    if not (run("generate_feedback", args.assignment, "--force")
            and _hand_back(args.course, args.assignment, args.db)
            and (not args.release or run("release_feedback", args.assignment))):
        return 1
    where = Path(args.course).resolve() / "feedback"
    print(_("cudacourse feedback: {where}/<student>/{assignment}/").format(
        where=where, assignment=args.assignment))
    if args.release:
        print(_("released to the exchange: each student runs `nbgrader fetch_feedback "
                "{assignment}`").format(assignment=args.assignment))
    return 0


def class_report(args: argparse.Namespace) -> int:
    """Per exercise: scores and common diagnoses; near-identical kernels; the LMS export."""
    from .grader import classreport

    try:
        rep = classreport.write(args.course, args.assignment, db_url=args.db,
                                out_dir=args.out, threshold=args.similarity,
                                plot_png=not args.no_plot, roster_file=args.roster,
                                lms_assignment=args.lms_assignment)
    except (FileNotFoundError, LookupError, ValueError) as exc:
        print(f"cudacourse report: {exc}", file=sys.stderr)
        return 2
    print(rep.text)
    for name, path in rep.files.items():
        print(f"{name:10} {path}")
    return 0


def new_course(args: argparse.Namespace) -> int:
    """A course folder of the instructor's own, made from this checkout."""
    from .course.authoring import CourseRootNotFound, find_root
    from .grader import coursefolder

    try:
        checkout = find_root(args.source)
        written = coursefolder.create(args.folder, checkout, lang=args.lang,
                                      assignments=args.assignment, exchange=args.exchange)
    except (CourseRootNotFound, coursefolder.CourseFolderError, OSError) as exc:
        print(f"cudacourse new-course: {exc}", file=sys.stderr)
        return 2
    folder = Path(args.folder).resolve()
    print(f"cudacourse new-course: {folder} from {checkout} ({args.lang}):")
    for rel in written:
        print(f"  {rel}")
    print("next (docs/instructors.md): cd into it, then `nbgrader generate_assignment NN_topic`, "
          "release and collect, `cudacourse grade NN_topic`, `cudacourse lab --instructor`")
    return 0


def main(argv: list[str] | None = None) -> int:
    # The command's own process prints no device line (doctor, build and grade say more);
    # workspace.CLI_ONLY_VARIABLES keeps a learner's kernel from inheriting the silence.
    os.environ.setdefault("CUDACOURSE_QUIET", "1")
    p = argparse.ArgumentParser(prog="cudacourse", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("doctor", help="describe the environment, exit 1 if broken").set_defaults(f=doctor)
    s = sub.add_parser("lab", help="open the course in JupyterLab")
    s.add_argument("--workspace", help="where your notebooks live (default: ./workspace)")
    s.add_argument("--instructor", action="store_true",
                   help="open the course root with nbgrader's instructor tools, on formgrader")
    s.add_argument("--course", help="with --instructor: the course folder (default: the "
                   "checkout, or the current folder)")
    s.add_argument("--lang", choices=LANGUAGES, default=None,
                   help="the course's language: en (default) or ja (the Japanese edition, "
                        "notebooks/ja/, with messages in Japanese; also CUDACOURSE_LANG=ja)")
    s.set_defaults(f=lab, rest=[])  # other arguments go to JupyterLab
    s = sub.add_parser("i18n", help="translations: update the files from the English, or "
                                    "report what is missing or stale")
    s.add_argument("action", choices=("update", "status"))
    s.add_argument("--lang", choices=[x for x in LANGUAGES if x != "en"], default="ja")
    s.set_defaults(f=i18n_command)
    s = sub.add_parser("build", help="rebuild masters and learner notebooks from lessons/")
    s.add_argument("--check", action="store_true", help="only report stale files")
    s.add_argument("lessons", nargs="*", help="only these lessons (e.g. 02 or 02_threads)")
    s.set_defaults(f=build)
    s = sub.add_parser("lesson", help="for course authors: scaffold a lesson (new NN_topic), "
                       "or report every rule a lesson breaks (check [NN_topic ...])")
    s.add_argument("action", choices=("new", "check"))
    s.add_argument("lessons", nargs="*", help="new: the lesson's name, NN_topic; check: the "
                   "lessons (07 or 07_topic; default every lesson)")
    s.add_argument("--title", help="new: the lesson's title (default: from the topic)")
    s.set_defaults(f=lesson_command)
    s = sub.add_parser("quiz-hash", help="the bank hash of an answer (for question authors)")
    s.add_argument("qid")
    s.add_argument("choice")
    s.set_defaults(f=quiz_hash)
    s = sub.add_parser("bench", help="benchmark the course's kernels against measured ceilings",
                       add_help=False)
    s.set_defaults(f=bench, rest=[])  # its own options are parsed by cudacourse.bench
    s = sub.add_parser("grade", help="autograde an assignment: sandboxed, parallel, via nbgrader")
    s.add_argument("assignment")
    s.add_argument("--course", default=".", help="course root (nbgrader_config.py; default .)")
    s.add_argument("--student", action="append", help="only this student (repeatable)")
    s.add_argument("--workers", type=int, default=None,
                   help="submissions graded at once (default: one per CPU core; on a machine "
                        "with several GPUs the jobs take them in turn)")
    s.add_argument("--timeout", type=int, default=90,
                   help="seconds per cell (default 90: the slowest lesson cell takes about 10 s in "
                        "the simulator on 2 cores; a hung cell costs this once)")
    s.add_argument("--feedback-timeout", type=int, default=None,
                   help="seconds per cell in the feedback run (default: --timeout); no point "
                        "comes from that run, so a hung learner cell can cost less there")
    s.add_argument("--output-cap", type=int, default=20_000, help="characters kept per cell")
    s.add_argument("--executor", default="thread",
                   help="thread (default), process, or MODULE:FACTORY returning a "
                        "concurrent.futures.Executor for N workers (e.g. Dask)")
    s.add_argument("--sandbox", choices=("auto", "bwrap", "fallback"), default="auto")
    s.add_argument("--require-sandbox", action="store_true",
                   help="refuse to grade unless bubblewrap isolates submissions")
    s.add_argument("--memory-mb", type=int, default=4096,
                   help="memory per sandboxed process (0: no limit; default 4096)")
    s.add_argument("--db", help="gradebook URL (default sqlite:///COURSE/gradebook.db)")
    s.add_argument("--no-feedback-run", action="store_true",
                   help="verdicts only: feedback then shows just the test cells' results")
    s.add_argument("--no-progress", action="store_true")
    from .grader.distributed import add_arguments as _dask_arguments

    _dask_arguments(s)  # --local-cluster N, --scheduler tcp://HOST:PORT
    s.set_defaults(f=grade)
    for name, what in (("collect-zip", "an LMS download (a zip of per-student folders)"),
                       ("collect", "nbgrader's exchange inbound (without following links)")):
        s = sub.add_parser(name, help=f"collect {what} into submitted/, refusing links, "
                           "pipes and paths that climb")
        if name == "collect-zip":
            s.add_argument("file")
            s.add_argument("--archive-times", metavar="ZONE", help="take each student's "
                           "latest file time in the zip (the LMS's) as the hand-in time, in "
                           "this zone (the LMS server's, e.g. UTC); default: no time")
        s.add_argument("assignment")
        s.add_argument("--course", default=".", help="course root (default .)")
        s.add_argument("--update", action="store_true",
                       help="replace submissions already collected")
        s.add_argument("--roster", help="roster CSV (student_id, login/uid, moodle_id, "
                       "canvas_id, ...; default COURSE/roster.csv when there is one)")
        s.set_defaults(f=collect)
    s = sub.add_parser("new-course", help="a course folder of your own (a term's gradebook, "
                       "submissions and grades) made from this checkout's masters")
    s.add_argument("folder", help="the new course folder (outside the checkout)")
    s.add_argument("--lang", choices=LANGUAGES, default="en",
                   help="the edition whose masters the course grades (default en)")
    s.add_argument("--assignment", action="append",
                   help="only this assignment (01 or 01_gpu_vs_cpu; repeatable)")
    s.add_argument("--exchange", help="the exchange's root (c.Exchange.root), for "
                   "nbgrader release_assignment / fetch / submit / collect")
    s.add_argument("--from", dest="source", default=None,
                   help="the course checkout (default: found from the current directory)")
    s.set_defaults(f=new_course)
    s = sub.add_parser("feedback", help="feedback for an assignment (nbgrader "
                       "generate_feedback) and, with --release, into the exchange for "
                       "`nbgrader fetch_feedback`")
    s.add_argument("assignment")
    s.add_argument("--course", default=".", help="course root (default .)")
    s.add_argument("--db", help="gradebook URL (default sqlite:///COURSE/gradebook.db)")
    s.add_argument("--release", action="store_true",
                   help="then nbgrader release_feedback: every graded student's feedback")
    s.set_defaults(f=feedback)
    s = sub.add_parser("report", help="class report: scores and diagnoses per exercise, "
                       "near-identical kernels, LMS export")
    s.add_argument("assignment")
    s.add_argument("--course", default=".", help="course root (default .)")
    s.add_argument("--db", help="gradebook URL (default sqlite:///COURSE/gradebook.db)")
    s.add_argument("--out", help="where to write (default COURSE/grading/ASSIGNMENT/report)")
    s.add_argument("--similarity", type=float, default=0.92,
                   help="pair kernels at least this similar after normalising (0-1]")
    s.add_argument("--no-plot", action="store_true", help="skip scores.png")
    s.add_argument("--roster", help="roster CSV for the Canvas and Moodle grade files "
                   "(default COURSE/roster.csv when there is one)")
    s.add_argument("--lms-assignment", help="the assignment's column in the LMS gradebook, "
                   "e.g. 'Lesson 1 (12345)' for Canvas (default: the assignment id)")
    s.set_defaults(f=class_report)
    args, unknown = p.parse_known_args(argv)
    if unknown:
        if args.f not in (lab, bench):
            p.error("unrecognized arguments: " + " ".join(unknown))
        args.rest = unknown
    return args.f(args)


if __name__ == "__main__":
    sys.exit(main())
