"""Concept questions: a bank kept as data, asked inline, graded by nbgrader.

The bank is ``quizzes/<lesson>.toml``. Answers are stored only as salted SHA-256 hashes, so
neither the bank nor a learner's notebook spells out the key. In a notebook::

    quiz.ask("01_gpu_vs_cpu.blocks")      # "Question 2: Blocks for 1,000 elements", a widget
    answer_blocks = "b"                   # the learner's answer, in an autograded answer cell
    quiz.grade("01_gpu_vs_cpu.blocks", answer_blocks)   # in the locked test cell

Three kinds of question (``kind`` in the bank):

* ``choice`` (the default): one right letter, ``answer_x = "b"``;
* ``multi``: every letter that applies ("pick the lines that race"), ``answer_x = "a, c"``;
* ``number``: a number within ``tol`` of the right value, ``answer_x = 4.2``.

A bank entry::

    [[question]]
    id = "blocks"
    title = "Blocks for 1,000 elements"       # the header, after "Question N:"
    predict = true                            # it asks to predict or compute
    prompt = "..."
    choices = { a = "...", b = "...", c = "...", d = "..." }
    answer = "<cudacourse quiz-hash 01_gpu_vs_cpu.blocks b>"
    why = { a = "the misconception behind (a)", b = "one line: why (b) is right", ... }
    explain = "the full explanation: after a right answer, and in graded feedback"
    hint = "a nudge after a wrong answer (optional)"

A ``number`` question has ``unit``, ``tol`` and ``wrong = [{ value = ..., why = "..." }]`` (the
values that common mistakes give) instead of ``choices`` and ``why``.

Modes (chosen per assignment by the instructor, see ``cudacourse.grader.quiz_mode``): *formative*
questions give instant right/wrong feedback and carry no points; *graded* ones record the
answer (``record``) and are graded only at autograding, with the explanation in the feedback.
"""

from __future__ import annotations

import hashlib
import itertools
import linecache
import math
import os
import re
import textwrap
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from . import i18n
from .i18n import _

_SALT = "cudacourse-quiz-v1"
KINDS = ("choice", "multi", "number")


def _digest(qid: str, key: str) -> str:
    return hashlib.sha256(f"{_SALT}:{qid}:{key}".encode()).hexdigest()


def _letters(answer: str) -> list[str]:
    """ "(B), d " -> ["b", "d"]: forgiving about case, spaces, parentheses and separators."""
    parts = re.split(r"[\s,;]+", str(answer).strip().lower().replace("(", " ").replace(")", " "))
    return sorted({p for p in parts if p})


@dataclass(frozen=True)
class Question:
    qid: str  # "<lesson>.<id>"
    prompt: str
    choices: dict[str, str]
    answer_hash: str
    explain: str
    hint: str
    title: str = ""
    kind: str = "choice"
    number: int = 0  # position in the lesson, from 1
    why: dict[str, str] = field(default_factory=dict)
    predict: bool = False
    unit: str = ""
    tol: float = 0.0
    wrong: tuple[tuple[float, str], ...] = ()

    @property
    def var(self) -> str:
        """The learner's answer variable: ``answer_<id>``."""
        return "answer_" + self.qid.split(".", 1)[1]

    @property
    def header(self) -> str:
        if self.title:
            return _("Question {number}: {title}").format(number=self.number, title=self.title)
        return _("Question {number}").format(number=self.number)

    def answer_format(self) -> str:
        """How to write the answer, e.g. ``answer_blocks = "<letter>"``, one of a, b, c, d."""
        letters = ", ".join(self.choices)
        if self.kind == "choice":
            return _('{var} = "<letter>", one of {letters}').format(var=self.var, letters=letters)
        if self.kind == "multi":
            return _('{var} = "<letters>", every one of {letters} that applies, '
                     'separated by commas').format(var=self.var, letters=letters)
        if self.unit:
            return _("{var} = <a number of {unit}>, within {tol}").format(
                var=self.var, unit=self.unit, tol=f"{self.tol:g}")
        return _("{var} = <a number>, within {tol}").format(var=self.var, tol=f"{self.tol:g}")

    # --- checking -----------------------------------------------------------------------
    def is_right(self, answer: object) -> bool:
        if self.kind == "number":
            x = _as_number(answer)
            if x is None:
                return False
            k = x / self.tol
            return any(_digest(self.qid, str(int(b))) == self.answer_hash
                       for b in {math.floor(k), math.ceil(k)})
        if not isinstance(answer, str):
            return False
        return _digest(self.qid, ",".join(_letters(answer))) == self.answer_hash

    def right_choices(self) -> list[str]:
        """The key, recovered by trying every possible answer (choice and multi only)."""
        keys = list(self.choices)
        sizes = [1] if self.kind == "choice" else range(1, len(keys) + 1)
        for r in sizes:
            for combo in itertools.combinations(keys, r):
                if _digest(self.qid, ",".join(sorted(combo))) == self.answer_hash:
                    return list(combo)
        raise ValueError(f"{self.qid}: no choice matches the stored answer hash")

    def format_problem(self, answer: object) -> str | None:
        """Why ``answer`` is not even a well-formed answer, or None."""
        if self.kind == "number":
            if isinstance(answer, bool) or _as_number(answer) is None:
                return _("{var} must be a number, e.g. {var} = 12.5; got {answer}").format(
                    var=self.var, answer=repr(answer))
            return None
        if not isinstance(answer, str):
            return _("{var} must be a letter in quotes: {format}; got {answer}").format(
                var=self.var, format=self.answer_format(), answer=repr(answer))
        picked = _letters(answer)
        bad = [p for p in picked if p not in self.choices]
        if bad or not picked:
            return _("{answer} is not one of the choices {letters}: {format}").format(
                answer=repr(answer), letters=", ".join(self.choices),
                format=self.answer_format())
        if self.kind == "choice" and len(picked) > 1:
            return _("pick one letter only: {format}").format(format=self.answer_format())
        return None

    def text(self) -> str:
        lines = [self.header, "", self.prompt, ""]
        lines += [f"  ({k}) {v}" for k, v in self.choices.items()]
        lines += ["", _("Answer in the cell below: {format}").format(format=self.answer_format())]
        return "\n".join(lines)


def _as_number(answer: object) -> float | None:
    """A number from an int, a float or a string ("1,024", "1_024", "1.2", "1,2" = 1.2)."""
    if isinstance(answer, bool):
        return None
    if isinstance(answer, str):
        s = answer.strip().replace("_", "")
        if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d*)?", s):
            s = s.replace(",", "")  # thousands separators
        elif re.fullmatch(r"[-+]?\d*,\d+", s):
            s = s.replace(",", ".")  # a decimal comma
        answer = s
    try:
        x = float(answer)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# --- the bank ----------------------------------------------------------------------------
def bank(lesson: str) -> dict[str, Question]:
    """All questions of one lesson's bank, by full id, in the order the lesson asks them,
    their texts in the course's language (``cudacourse.i18n``; English where untranslated).
    Ids, kinds and answers never depend on the language."""
    return _bank(lesson, i18n.language())


@lru_cache(maxsize=None)
def _bank(lesson: str, lang: str) -> dict[str, Question]:
    tr = _texts(lesson, lang)
    try:
        raw = resources.files("cudacourse.quizzes").joinpath(f"{lesson}.toml").read_text()
    except FileNotFoundError:
        raise KeyError(f"no question bank for lesson {lesson!r}") from None
    data = tomllib.loads(raw)
    out: dict[str, Question] = {}
    for n, q in enumerate(data.get("question", []), 1):
        qid = f"{lesson}.{q['id']}"
        if qid in out:
            raise ValueError(f"duplicate question id {qid}")
        kind = q.get("kind", "choice")
        if kind not in KINDS:
            raise ValueError(f"{qid}: kind must be one of {KINDS}, got {kind!r}")
        if kind == "number" and not q.get("tol", 0) > 0:
            raise ValueError(f"{qid}: a number question needs tol > 0")
        key = f"q.{q['id']}"
        out[qid] = Question(
            qid, tr(f"{key}.prompt", q["prompt"].strip()),
            {k: tr(f"{key}.choice.{k}", v) for k, v in q.get("choices", {}).items()},
            q["answer"],
            tr(f"{key}.explain", q.get("explain", "").strip()),
            tr(f"{key}.hint", q.get("hint", "").strip()),
            title=tr(f"{key}.title", q.get("title", "").strip()), kind=kind, number=n,
            why={k: tr(f"{key}.why.{k}", v.strip()) for k, v in q.get("why", {}).items()},
            predict=bool(q.get("predict", False)), unit=q.get("unit", ""),
            tol=float(q.get("tol", 0.0)),
            wrong=tuple((float(w["value"]), tr(f"{key}.wrong.{i}", w["why"].strip()))
                        for i, w in enumerate(q.get("wrong", []))))
    return out


def _texts(lesson: str, lang: str):
    """``(key, english) -> text`` for one lesson's question texts in ``lang``."""
    if lang == i18n.DEFAULT:
        return lambda key, english: english
    from .i18n import translations

    texts = translations.question_texts(lesson, lang)
    return lambda key, english: translations.pick(texts, key, english) if english else english


def lessons() -> list[str]:
    files = resources.files("cudacourse.quizzes").iterdir()
    return sorted(f.name[:-5] for f in files if f.name.endswith(".toml"))


def get(qid: str) -> Question:
    lesson = qid.split(".", 1)[0]
    questions = bank(lesson)
    try:
        return questions[qid]
    except KeyError:
        raise KeyError(f"no question {qid!r} in the {lesson!r} bank") from None


def answer_hash(qid: str, answer: str) -> str:
    """The hash stored in the bank for ``answer`` being the key to ``qid``.

    For a ``number`` question of the bank, ``answer`` is the value (rounded to ``tol``); for
    ``multi``, the letters that apply ("a, c").
    """
    try:
        q = get(qid)
    except KeyError:
        q = None
    if q is not None and q.kind == "number":
        x = _as_number(answer)
        if x is None:
            raise ValueError(f"{qid} is a number question; got {answer!r}")
        return _digest(qid, str(round(x / q.tol)))
    return _digest(qid, ",".join(_letters(answer)))


# --- feedback ----------------------------------------------------------------------------
def _wrong_why(q: Question, answer: object) -> str:
    """What the learner's wrong answer most likely got wrong."""
    if q.kind == "number":
        x = _as_number(answer)
        for value, why in q.wrong:
            if x is not None and abs(x - value) <= q.tol:
                return why
        return q.hint or _("Work it out again, step by step.")
    picked = _letters(str(answer))
    if q.kind == "choice":
        return q.why.get(picked[0]) or q.hint or _("Think about it again.")
    right = set(q.right_choices())
    notes = [f"({k}) {q.why[k]}" for k in picked if k not in right and k in q.why]
    missing = len(right - set(picked))
    if missing:
        notes.append(i18n.ngettext("{n} more choice applies.", "{n} more choices apply.",
                                   missing).format(n=missing)
                     + (_(" Hint: {hint}").format(hint=q.hint) if q.hint else ""))
    return " ".join(notes) or q.hint


def _right_why(q: Question) -> str:
    if q.kind == "number" or not q.why:
        return q.explain
    keys = q.right_choices()
    return " ".join(q.why[k] for k in keys if k in q.why) or q.explain


def feedback(qid: str, answer: object) -> tuple[bool, str]:
    """(right?, what to tell the learner): the why of their choice, never the key."""
    q = get(qid)
    problem = q.format_problem(answer)
    if problem:
        return False, problem
    if q.is_right(answer):
        return True, _("Right. ") + _right_why(q)
    return False, _("Not quite. ") + _wrong_why(q, answer)


def answer(qid: str, choice: object) -> bool:
    """Plain-text instant feedback: print it and return whether the answer is right."""
    ok, text = feedback(qid, choice)
    print(text)
    return ok


def _show(answer: object) -> str:
    return f'"{answer}"' if isinstance(answer, str) else repr(answer)


def grade(qid: str, choice: object, reveal: bool = False) -> None:
    """For nbgrader test cells: raise AssertionError, whose message teaches, unless right.

    ``reveal`` (graded mode, after submission) adds the full explanation to both outcomes;
    so does running inside the course's grader (``after_submission``), whichever form of
    the test cell it runs.
    """
    __tracebackhide__ = True  # IPython and pytest show the test cell, not this frame
    q = get(qid)
    reveal = reveal or after_submission()
    problem = q.format_problem(choice)
    # One paragraph per line, no blank line: graders may show only an error's first paragraph.
    extra = ("\n" + _("The explanation: {explain}").format(explain=" ".join(q.explain.split()))
             if reveal and q.explain else "")
    if problem:
        message = problem
    elif q.is_right(choice):
        print(_("{header}: right. {why}").format(header=q.header, why=_right_why(q))
              + (extra if q.kind != "number" else ""))
        return
    else:
        message = _("{var} = {answer} is not the right answer to {header}. ").format(
            var=q.var, answer=_show(choice), header=q.header) + f"{_wrong_why(q, choice)}{extra}"
    _fail(message)


# IPython shows every frame of a traceback except those marked ``__tracebackhide__``, and
# never hides the last one, where the exception is raised. So the AssertionError is raised
# in a one-line frame of its own, without source: the learner sees their test cell and the
# explanation, not this module's code.
_WHERE = "<answer check>"
_RAISE = compile("raise _exc from None", _WHERE, "exec")
_SHOWN = "# your answer, checked: the explanation follows\n"


def _fail(message: str) -> None:
    __tracebackhide__ = True
    # What IPython prints as this frame's source line (mtime None: linecache keeps it).
    linecache.cache[_WHERE] = (len(_SHOWN), None, [_SHOWN], _WHERE)
    # Wrapped: a traceback is preformatted text, which notebooks do not wrap.
    text = "\n".join(textwrap.fill(part, 88, break_on_hyphens=False)
                     for part in message.split("\n"))
    exec(_RAISE, {"_exc": AssertionError(text)})  # noqa: S102 - our own constant code


def after_submission() -> bool:
    """Whether this runs in grading, after the learner submitted (so nothing is given away).

    ``CUDACOURSE_GRADING=1`` says so explicitly; ``cudacourse grade`` runs every check in a
    sandbox that carries ``CUDACOURSE_SANDBOX_TOKEN``, and runs the master's test cells (the
    formative form), so that is taken as the same signal.
    """
    return os.environ.get("CUDACOURSE_GRADING") == "1" or bool(
        os.environ.get("CUDACOURSE_SANDBOX_TOKEN"))


def record(qid: str, choice: object) -> None:
    """Graded mode, learner side: check only the form of the answer, reveal nothing."""
    __tracebackhide__ = True
    q = get(qid)
    problem = q.format_problem(choice)
    if problem:
        _fail(problem)
    print(_("Recorded {var} = {answer}. {header} is graded after you submit; "
            "the explanation comes with your feedback.").format(
        var=q.var, answer=_show(choice), header=q.header))


def ask(qid: str, graded: bool = False) -> None:
    """Show the question; with ipywidgets, a widget (instant feedback unless ``graded``)."""
    q = get(qid)
    from IPython.display import Markdown, display

    md = f"**{q.header}.** {q.prompt}\n\n" + "\n".join(
        f"- **({k})** {v}" for k, v in q.choices.items())
    how = "\n\n" + _("Answer in the cell below: `{format}`.").format(format=q.answer_format())
    if graded:
        how += _(" This question is graded after you submit: no right or wrong before then.")
    try:
        import ipywidgets as w
    except ImportError:
        tail = "" if graded else _(" Check an answer with `{call}`.").format(
            call=f"quiz.answer({qid!r}, ...)")
        display(Markdown(md + how + tail))
        return
    display(Markdown(md + how))
    # The choices' text is in the Markdown above (readable anywhere, also where widgets do not
    # render); the widgets only carry the letters.
    if q.kind == "choice":
        pick = w.RadioButtons(options=[(f"({k})", k) for k in q.choices], value=None,
                              description=_("Your choice:"), style={"description_width": "initial"})
        boxes: list = [pick]

        def value() -> object:
            return pick.value
    elif q.kind == "multi":
        boxes = [w.Checkbox(description=f"({k})", value=False, indent=False) for k in q.choices]

        def value() -> object:
            chosen = [k for k, b in zip(q.choices, boxes) if b.value]
            return ", ".join(chosen) if chosen else None
    else:
        num = w.Text(description=(_("Your answer ({unit}):").format(unit=q.unit) if q.unit
                                  else _("Your answer:")),
                     style={"description_width": "initial"})
        boxes = [num]

        def value() -> object:
            return num.value.strip() or None
    button = w.Button(description=_("Record") if graded else _("Check"), button_style="primary")
    out = w.HTML()

    def on_click(_button: object) -> None:
        v = value()
        if v is None:
            out.value = "<i>" + (_("Pick a choice first.") if q.kind != "number" else
                                 _("Type a number first.")) + "</i>"
            return
        shown = v if q.kind != "number" else _as_number(v)
        problem = q.format_problem(shown if shown is not None else v)
        if problem:
            out.value = f"<span style='color:#b35900'>{_html(problem)}</span>"
            return
        line = f"<code>{q.var} = {_html(_show(shown))}</code>"
        if graded:
            out.value = _("Now write {line} in the cell below; it is graded after you "
                          "submit.").format(line=line)
            return
        ok, text = feedback(qid, shown)
        colour = "#1a7f37" if ok else "#b35900"
        more = _(" Write {line} in the cell below.").format(line=line) if ok else ""
        out.value = f"<span style='color:{colour}'>{_html(text)}</span>{more}"

    button.on_click(on_click)
    display(w.VBox([*boxes, button, out]))


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
