"""The in-kernel tamper audit (the feedback run's second line; points never depend on it)."""

from __future__ import annotations

import json

from cudacourse.grader import audit as grading_audit
from cudacourse.grader import kernelrun


def test_audit_sees_nothing_in_an_untouched_session():
    ns = {"__builtins__": __builtins__}
    base = grading_audit.snapshot(ns, load=True)
    import numpy as np

    import cudacourse
    from cudacourse.course import quiz

    ns.update(cudacourse=cudacourse, quiz=quiz, np=np)
    assert grading_audit.compare(base, grading_audit.snapshot(ns)) == []


def test_audit_names_what_changed(monkeypatch):
    ns = {"__builtins__": __builtins__}
    base = grading_audit.snapshot(ns, load=True)
    import numpy as np

    import cudacourse.check._engine as engine

    monkeypatch.setattr(engine, "compare", lambda *a, **k: None)
    monkeypatch.setattr(np.testing, "assert_allclose", lambda *a, **k: None)
    ns["np"] = object()
    text = "\n".join(grading_audit.compare(base, grading_audit.snapshot(ns)))
    assert "cudacourse.check._engine.compare was replaced" in text
    assert "numpy.testing.assert_allclose was replaced" in text
    assert "the notebook name np no longer refers to the module numpy" in text


def test_audit_source_runs_standalone_like_in_a_kernel():
    """The feedback run sends the module's text; it must not need the cudacourse package."""
    user_ns: dict = {"__builtins__": __builtins__}
    exec(compile(kernelrun.AUDIT_SOURCE, "<audit>", "exec"),  # noqa: S102
         {"__name__": "_a", "_cudacourse_user_ns": user_ns, "_cudacourse_load": False})
    snap = json.loads(user_ns.pop("__cudacourse_audit__"))
    assert "attr:numpy.allclose" in snap and "ipy:shell" in snap
    assert kernelrun.compare_snapshots(snap, snap) == []


def test_audit_watches_every_checker_module():
    """Each module under cudacourse/check/ (but the by-path child and the seam list) is
    watched: the engine's by name, loaded or not; the registry's checker modules because
    loading ``cudacourse.check`` loads them all. So a rebound topic checker is noticed."""
    from pathlib import Path

    import cudacourse.check
    from cudacourse.course import lessons

    here = Path(cudacourse.check.__file__).parent
    modules = {f"cudacourse.check.{p.stem}" for p in here.glob("*.py") if p.stem != "__init__"}
    engine = {m for m in modules if m.rsplit(".", 1)[1].startswith("_")}
    assert engine - {"cudacourse.check._child", "cudacourse.check._numba_hooks"} <= set(
        grading_audit.COURSE_MODULES)
    topics = {lesson.checker_module for lesson in lessons.LESSONS}
    kit = {"cudacourse.check.kit", "cudacourse.check.spec"}  # the kit, and the spec it exports
    assert kit <= set(grading_audit.COURSE_MODULES)
    assert topics == modules - engine - kit, \
        "a checker module outside the registry, or missing"
    snap = grading_audit.snapshot({}, load=True)
    assert all(snap.get(f"mod:{m}", "missing") != "missing" for m in topics), topics


def test_audit_notices_a_rebound_topic_checker(monkeypatch):
    ns = {"__builtins__": __builtins__}
    base = grading_audit.snapshot(ns, load=True)
    import cudacourse.check.vector as vector

    name = next(k for k, v in vars(vector).items() if callable(v) and not k.startswith("_")
                and getattr(v, "__module__", "") == vector.__name__)
    monkeypatch.setattr(vector, name, lambda *a, **k: None)
    text = "\n".join(grading_audit.compare(base, grading_audit.snapshot(ns)))
    assert f"cudacourse.check.vector.{name} was replaced" in text


def test_a_japanese_notebook_turning_the_kernel_japanese_is_no_tampering():
    """Issue 39: the baseline is taken before the setup cell; a Japanese notebook's
    ``cudacourse.setup(lang="ja")`` then loads the Japanese question banks. Each edition's
    bank is compared with its own baseline, and a real replacement is still seen."""
    from cudacourse import i18n
    from cudacourse.course import quiz

    ns = {"__builtins__": __builtins__}
    base = grading_audit.snapshot(ns, load=True)
    lesson = quiz.lessons()[0]
    with i18n.speaking("ja"):
        japanese = quiz.bank(lesson)  # what the learner's setup cell and quiz.ask do
        assert grading_audit.compare(base, grading_audit.snapshot(ns)) == []
        qid = next(iter(japanese))
        real = japanese[qid]
        try:  # the control: a learner cell that swaps a Japanese question is seen
            japanese[qid] = type(real)(**{**vars(real)}) if hasattr(real, "__dict__") else None
            from cudacourse.grader.lang import T

            problems = grading_audit.compare(base, grading_audit.snapshot(ns), T)
        finally:
            japanese[qid] = real
    assert problems == [f"{qid} の答えが置き換えられました"], problems
