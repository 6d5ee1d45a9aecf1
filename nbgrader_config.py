"""nbgrader configuration for cudacourse.

Masters (nbgrader "source") live in solutions/, learner copies (nbgrader "release") in
notebooks/: solutions/01_gpu_vs_cpu/01_gpu_vs_cpu.ipynb -> notebooks/01_gpu_vs_cpu/01_gpu_vs_cpu.ipynb.
"""

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

# The course is the folder that holds this file, as an absolute path (a relative "." made
# nbgrader say "root '.' is not absolute, standardizing it" three times per command).
c.CourseDirectory.root = str(__import__("pathlib").Path(__file__).resolve().parent)  # noqa: F821
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.course_id = "cudacourse"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.nbgrader*"]

c.IncludeHeaderFooter.header = ""
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
# Hidden tests are removed from the learner copy and put back at autograding time.
c.ClearHiddenTests.enforce_metadata = True


# The simulator runs ~4,400 GPU threads a second: a cell that launches a kernel and a
# checker needs far longer than nbgrader's 30 s default. A real GPU needs far less.
c.ExecutePreprocessor.timeout = 240
c.Execute.timeout = 240


# --- autograding: cudacourse.grader.autograde.ResilientExecute replaces nbgrader's Execute ---
# Learner code never runs in nbgrader's process: each test cell is scored by a clean,
# sandboxed verdict process, and the whole notebook runs in a sandbox for feedback only.
# `cudacourse grade ASSIGNMENT` is the documented way in (parallel, broken submissions
# reported as "not graded"); plain `nbgrader autograde` uses the same sandboxed step.
# See docs/instructors.md.
# The package is imported as itself: importing it chooses no device (cudacourse.setup does), so
# nbgrader's process and every grading kernel it starts stay device-neutral.
def _load_grading():
    """cudacourse.grader.autograde, or None when cudacourse is not installed here."""
    try:
        from cudacourse.grader import autograde
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "cudacourse":
            return None
        raise  # a module the grader needs is missing: say which, never grade without it
    return autograde


_grading = _load_grading()
if _grading is None:
    import sys

    print("nbgrader_config.py: cudacourse is not importable; autograde uses stock "
          "nbgrader Execute (no crash recovery, no tamper checks)", file=sys.stderr)
    if __import__("os").environ.get("CUDACOURSE_REQUIRE_GRADER") == "1":
        # `cudacourse grade` sets this: never fall back to stock Execute (learner code in-process)
        raise SystemExit("nbgrader_config.py: cudacourse.grader.autograde cannot be imported; "
                         "refusing to autograde with stock nbgrader")
else:
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, IgnorePattern,
                                        LimitOutput, SaveAutoGrades)

    from cudacourse.grader import policy as _policy

    # SyncDeadlines first: the configured due date reaches the gradebook before nbgrader's
    # AssignLatePenalties reads it (cudacourse.grader.policy).
    # SanitizeSubmission right after the verdicts: the autograded notebook (what formgrader
    # shows the instructor and feedback is made from) holds sanitized markup only.
    _sanitize = _grading.SanitizeSubmission
    c.Autograde.autograde_preprocessors = [_policy.SyncDeadlines, _grading.ResilientExecute,
                                           _sanitize, IgnorePattern,
                                           ClearMetadataPreprocessor, LimitOutput,
                                           SaveAutoGrades, AssignLatePenalties,
                                           CheckCellMetadata]
    c.AssignLatePenalties.plugin_class = _policy.LatePenalty
    # Feedback made from an autograded notebook of an older run is sanitized too.
    from nbgrader.converters import GenerateFeedback as _GF

    c.GenerateFeedback.preprocessors = [
        _sanitize, *_GF.class_traits()["preprocessors"].make_dynamic_default()]
    # Per-cell limit while autograding (tests and tools pass --ResilientExecute.timeout=N).
    c.ResilientExecute.timeout = 240
    # A deleted test cell comes back from the master (and is scored like the others).
    c.OverwriteCells.add_missing_cells = True


# Both pages (formgrader's view and the feedback HTML) render with nbconvert's own sanitizer
# on outputs as well: a second line behind SanitizeSubmission.
c.HTMLExporter.sanitize_html = True


# MathJax from the instructor's own server, not a CDN: cudacourse's templates folder first
# (its feedback/ and formgrade/ hold only mathjax.html.j2, shadowing nbconvert's), then
# nbgrader's own templates, which GenerateFeedback and formgrader use otherwise.
def _template_basedirs():
    import importlib.util
    import os

    spec = importlib.util.find_spec("cudacourse")
    nbgrader = importlib.util.find_spec("nbgrader")
    if spec is None or not spec.submodule_search_locations or nbgrader is None:
        return None
    ours = os.path.join(list(spec.submodule_search_locations)[0], "grader", "templates")
    theirs = os.path.join(os.path.dirname(nbgrader.origin), "server_extensions",
                          "formgrader", "templates")
    return [ours, theirs]


if _template_basedirs():
    c.HTMLExporter.extra_template_basedirs = _template_basedirs()


# --- deadlines and late work (cudacourse.grader.policy; docs/class-scale.md) ----------------
# A submission's time is the timestamp.txt beside it (nbgrader submit/collect write it).
# Nothing is late until an assignment has a due date here AND penalty_method is not "none".
c.CoursePolicy.due = {}  # e.g. {"01_gpu_vs_cpu": "2026-12-08 23:59:00 UTC"}
c.LatePenalty.penalty_method = "none"  # or "zero", "percent_per_day"
c.LatePenalty.percent_per_day = 10  # percent of the notebook's score per started day late
c.LatePenalty.max_percent = 100  # never more than this
c.LatePenalty.grace_minutes = 0  # up to this many minutes late counts as on time


# --- questions: formative or graded, per assignment (cudacourse.grader.quiz_mode) -----------------
# Formative (default): instant right/wrong in the widget, 0 points. Graded: the widget only
# records a choice, the answer is checked at autograding and explained in the feedback.
# List the graded assignments, then rebuild their learner copies (./course build NN).
c.QuizMode.graded = []  # e.g. ["03_memory", "04_shared_memory"]
c.QuizMode.points = 1  # points per graded question


if _grading is not None:
    from nbgrader.converters import GenerateAssignment as _GA

    from cudacourse.grader.quiz_mode import QuizMode as _QuizMode

    c.GenerateAssignment.preprocessors = [
        _QuizMode, *_GA.class_traits()["preprocessors"].make_dynamic_default()]


# --- the gradebook (cudacourse.grader.course.DB_ENV) -----------------------------------------
# `cudacourse grade` passes the gradebook URL to its nbgrader children in NBGRADER_DB_URL, not
# as --db=URL: a command line is in the process list for every user, password and all. Last
# in this file, so it wins over a db_url set above, as --db did. Set it yourself to keep a
# PostgreSQL password out of `cudacourse grade --db=...` too.
import os as _os  # noqa: E402

if _os.environ.get("NBGRADER_DB_URL"):
    c.CourseDirectory.db_url = _os.environ["NBGRADER_DB_URL"]
