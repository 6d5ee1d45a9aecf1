"""Partial credit for a graded test cell, from what its checks established.

A kernel test cell of the course is a few check calls::

    cudacourse.check.check_vector_add(vector_add)               # the visible cases
    ### BEGIN HIDDEN TESTS
    cudacourse.check.check_vector_add(vector_add, hidden=cudacourse.check.Cases(...))
    ### END HIDDEN TESTS

The verdict process (:mod:`verdict`) runs such a cell one statement at a time
(:func:`run_cell`) and keeps each statement's :class:`Outcome`; :func:`credit` turns them into
the fraction of the cell's points earned, and :func:`outputs` into what nbgrader scores.

The rule: three thirds.

* visible cases right: 1/3 -- every visible check passed, or failed *only* on technique;
* hidden cases right: 1/3 -- the same for every hidden check;
* technique right: 1/3 -- no check reported a technique cause, and the visible checks passed
  outright (so the technique was observed, on the visible cases at least).

A kernel whose visible values are wrong gets 0, whatever else it does: the visible cases are
the ones the learner could run, and a kernel that fails them is not "mostly right". A cell
that is anything but check calls (a quiz, ``quiz.grade(...)``; any assignment or other
statement) is all or nothing, as are check calls without a ``hidden=Cases(...)`` partner.

Why "technique only" is decided per checker (:data:`TECHNIQUE`, collected from the
``TECHNIQUE`` declaration at the top of each checker module), not per cause: a checker
raises at its first failure, so a technique diagnosis says "the values were right" only where
that checker compares the values *before* it looks at the technique. Reading the checkers:
``check_vector_add``/``check_saxpy``/``check_mirror`` compare each case then check the work is
spread (``serial_work``, ``redundant_work``); ``check_warp_sum`` compares then checks shuffles
(``no_shuffle``); ``check_block_sum`` compares then checks the tree (``no_tree``);
``check_tiled_matmul`` and ``check_heat_step`` look at reuse after every case's values
(``no_tiles``, ``wrong_technique``); ``check_pipelined_scale`` compares then checks streams
and pinned copies. Not listed, so no value credit: ``check_flash_rows``' ``no_tiles`` (raised
before its comparison), lesson 3's transfer causes (``implicit_copy``, ``copies_in_loop``...,
raised before the comparison), and every race or barrier cause (``missing_barrier``,
``divergent_barrier``, ``race``, ``stream_race``, ``warp_ub``): those are wrong kernels whose
wrong answer the simulator's schedule happened to hide, not right values by the wrong method.

Known limit: a check raises at its first failing case, so a technique failure on case 1 says
nothing about the values of cases 2 and 3 of that call. The hidden call (other sizes) is then
the second witness of the values; a kernel that is serial *and* wrong after case 1 of both
calls would keep the value thirds. The checkers would need a values-only mode to close this.

Not gameable: the outcomes are the verdict process's own records of which master statement
raised what. A technique cause counts only when the exception is the checkers'
``CheckFailure`` and no frame of an answer cell is in it or in what it chains (learner code can
raise builtin exceptions only, :mod:`allowlist`); learner output (prints, return values) never
enters :func:`credit`.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..course import lessons

# checker name -> causes it raises only after the case's values matched the reference: each
# checker module declares its own (``TECHNIQUE`` at its top), the registry collects them
TECHNIQUE: dict[str, frozenset[str]] = lessons.technique()

THIRD = 1.0 / 3.0


@dataclass(frozen=True)
class Outcome:
    """One statement of a test cell, as the verdict process saw it run.

    ``kind``: ``"visible"`` or ``"hidden"`` (a check call without / with ``hidden=True``) or
    ``"other"``; ``checker``: the called function's name for a check call; ``passed``;
    ``cause``: the checker's cause id when it failed with a trusted ``CheckFailure``, else
    None."""

    kind: str
    checker: str | None
    passed: bool
    cause: str | None = None

    @property
    def technique_only(self) -> bool:
        """Failed, and only on technique: the values of the case were right."""
        return (not self.passed and self.cause is not None
                and self.cause in TECHNIQUE.get(self.checker or "", frozenset()))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "checker": self.checker, "passed": self.passed,
                "cause": self.cause}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Outcome":
        return cls(str(d["kind"]), d.get("checker"), bool(d["passed"]), d.get("cause"))


def classify(stmt: ast.stmt) -> tuple[str, str | None]:
    """(kind, checker) of one statement of a master test cell: a bare call of a function
    named ``check_*`` is ``visible``, or ``hidden`` with ``hidden=Cases(...)`` (or ``True``)."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return "other", None
    func = stmt.value.func
    name = func.attr if isinstance(func, ast.Attribute) else (
        func.id if isinstance(func, ast.Name) else None)
    if not name or not name.startswith("check_"):
        return "other", None
    for kw in stmt.value.keywords:
        if kw.arg == "hidden":
            v = kw.value  # hidden=cudacourse.check.Cases(...): the master's hidden cases
            if isinstance(v, ast.Call) and (getattr(v.func, "attr", None) == "Cases"
                                            or getattr(v.func, "id", None) == "Cases"):
                return "hidden", name
            if isinstance(v, ast.Constant) and v.value is True:
                return "hidden", name
            if not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                return "other", None  # a computed flag: not a case set we can name
    return "visible", name


def credit(outcomes: Sequence[Outcome]) -> float:
    """The fraction (0 to 1) of a test cell's points its outcomes earn (rule: module doc)."""
    if not outcomes:
        return 0.0
    if all(o.passed for o in outcomes):
        return 1.0
    kinds = {o.kind for o in outcomes}
    if "other" in kinds or kinds != {"visible", "hidden"}:
        return 0.0  # a quiz, a setup statement, or no hidden partner: all or nothing
    visible = [o for o in outcomes if o.kind == "visible"]
    hidden = [o for o in outcomes if o.kind == "hidden"]
    if not all(o.passed or o.technique_only for o in visible):
        return 0.0
    earned = THIRD
    if all(o.passed or o.technique_only for o in hidden):
        earned += THIRD
    if all(o.passed for o in visible) and not any(o.technique_only for o in hidden):
        earned += THIRD
    return earned  # at most 2/3 here: 3/3 means every statement passed (above)


def trusted_cause(exc: BaseException, failure_type: type | None) -> str | None:
    """The exception's cause id if the checkers raised it (their ``CheckFailure``, no frame
    of an answer cell in it or in anything it chains), else None."""
    if failure_type is None or not isinstance(exc, failure_type):
        return None
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        tb = cur.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.startswith("<answer cell"):
                return None
            tb = tb.tb_next
        cur = cur.__cause__ or cur.__context__
    cause = getattr(exc, "cause", None)
    return str(cause) if isinstance(cause, str) else None


def _failure_type() -> type | None:
    """The checkers' ``CheckFailure`` when the checkers ran in this process (never imported
    here for it: no checkers, no technique credit)."""
    check = sys.modules.get("cudacourse.check")
    failure = getattr(check, "CheckFailure", None)
    return failure if isinstance(failure, type) else None


def run_cell(source: str, ns: dict[str, Any], grade_id: str, record: dict[str, Any]) -> Any:
    """Run a master test cell in ``ns`` one top-level statement at a time, as the verdict
    process does; a failing statement does not stop the next (a hidden check still runs
    after a visible one failed). Stores ``record["statements"]`` (the outcomes) and, when a
    statement failed, ``record["credit"]`` (:func:`credit`), then re-raises the first failure.
    Returns the value of a final expression statement when every statement passed."""
    filename = f"<test cell '{grade_id}'>"
    tree = ast.parse(source, filename=filename)
    failure_type = _failure_type()
    outcomes: list[Outcome] = []
    first: BaseException | None = None
    value = None
    for i, stmt in enumerate(tree.body):
        kind, checker = classify(stmt)
        last = i == len(tree.body) - 1 and isinstance(stmt, ast.Expr)
        try:
            if last:
                value = eval(compile(ast.Expression(stmt.value), filename, "eval"), ns)  # noqa: S307 - master code
            else:
                exec(compile(ast.Module(body=[stmt], type_ignores=[]), filename, "exec"), ns)  # noqa: S102
            outcomes.append(Outcome(kind, checker, True))
        except BaseException as exc:  # noqa: BLE001 - every failure is an outcome
            if not isinstance(exc, Exception):
                raise  # KeyboardInterrupt, SystemExit: not a verdict on the kernel
            outcomes.append(Outcome(kind, checker, False, trusted_cause(exc, failure_type)))
            if first is None:
                first = exc
    record["statements"] = [o.to_dict() for o in outcomes]
    if first is not None:
        record["credit"] = credit(outcomes)
        raise first
    return value


def _words(outcomes: Iterable[Outcome]) -> str:
    outs = list(outcomes)
    parts = []
    for kind in ("visible", "hidden"):
        these = [o for o in outs if o.kind == kind]
        if these:
            ok = all(o.passed or o.technique_only for o in these)
            parts.append(f"{kind} cases {'right' if ok else 'wrong'}")
    if any(o.technique_only for o in outs):
        parts.append("technique wrong")
    return ", ".join(parts)


def outputs(v: dict[str, Any], outs: list[dict[str, Any]],
            points: Any) -> list[dict[str, Any]]:
    """The outputs nbgrader scores for verdict ``v``: ``outs`` (its all-or-nothing outputs)
    unless ``v`` failed with a credit strictly between 0 and 1; then the failure becomes
    stdout text (the learner still reads the diagnosis) and an ``execute_result`` holding
    the points earned, which nbgrader takes as the cell's score."""
    frac = v.get("credit")
    try:
        max_points = float(points)
    except (TypeError, ValueError):
        return outs
    if (v.get("status") != "fail" or not isinstance(frac, (int, float))
            or isinstance(frac, bool) or not 0.0 < float(frac) < 1.0 or max_points <= 0):
        return outs
    earned = round(float(frac) * max_points, 2)
    try:
        said = _words(Outcome.from_dict(d) for d in v.get("statements", []))
    except (KeyError, TypeError):
        said = ""
    kept = [o for o in outs if o.get("output_type") != "error"]
    errors = [o for o in outs if o.get("output_type") == "error"]
    text = "".join(f"{e.get('ename', 'CheckFailure')}: {e.get('evalue', '')}\n" for e in errors)
    text += (f"[partial credit: {earned:g} of {max_points:g} points"
             + (f" ({said})" if said else "") + "]\n")
    kept.append({"output_type": "stream", "name": "stdout", "text": text})
    kept.append({"output_type": "execute_result", "execution_count": None, "metadata": {},
                 "data": {"text/plain": repr(earned)}})
    return kept


__all__ = ["Outcome", "TECHNIQUE", "classify", "credit", "outputs", "run_cell",
           "trusted_cause"]
