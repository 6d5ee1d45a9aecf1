"""What a grader and a learner see first: the summary on top of an autograded notebook.

nbgrader's feedback and formgrader both render the autograded notebook. This module, run by
the execute step (``cudacourse.grader.autograde.ResilientExecute``) after the verdicts are in, makes
that notebook open on a summary and read plainly further down:

* a **summary** cell at the top: each graded cell by name ("Question 2: Blocks for 1,000
  elements", "Exercise 1: write `vector_add`"), its points, what went wrong in one plain
  sentence and the fix, and a link to the cell; formative questions (0 points) say right or
  not, without points; the late rule applied, when the submission was late;
* **test cells' messages** wrapped to :data:`WIDTH` columns, without the exception-class prefix
  ("CheckFailure:", "AssertionError:"); a blank answer says it is unanswered rather than
  ``NameError``;
* **questions shown as questions**: the output of each ``quiz.ask("...")`` cell is the
  question's text from the course's bank (a widget cannot be rendered in static HTML).

Everything that comes from a submission (messages, answers, headings) is escaped
(:func:`md_escape`) before it enters markdown. The question text comes from the course's own
bank, read as data (this module imports nothing from ``cudacourse``: nbgrader's process loads
it by path and must not choose a device).
"""

from __future__ import annotations

import ast
import html
import json
import re
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from .. import i18n
from .lang import T, language, of_notebook, template_in

WIDTH = 88
SUMMARY_ID = "cudacourse-summary"
QUIZ_BANK = Path(__file__).resolve().parents[1] / "quizzes"
ASK = re.compile(r"""^\s*quiz\.ask\(\s*["']([\w.]+)["']\s*(?:,[^()]*)?\)\s*$""")
GRADE = re.compile(r"""quiz\.(?:grade|record)\(\s*["']([\w.]+)["']\s*,\s*(\w+)""")
PREFIX = re.compile(r"^\s*(?:[A-Z]\w*(?:Error|Failure|Failed|Exception)|NotGradable|"
                    r"CheckerTampered|GraderError)\s*:\s*")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()|~])")
STUB = re.compile(r"raise\s+NotImplementedError")


def md_escape(text: Any) -> str:
    """Untrusted text as inert markdown on one line: HTML escaped, markdown punctuation
    backslash-escaped, whitespace collapsed (so nothing starts a list, a heading or a link)."""
    flat = " ".join(ANSI.sub("", str(text)).split())
    return html.escape(_MD_SPECIAL.sub(r"\\\1", flat), quote=False)


def plain_message(text: Any) -> str:
    """A checker's message without the exception class's name in front and without ANSI."""
    lines = [PREFIX.sub("", ANSI.sub("", ln)) for ln in str(text or "").splitlines()]
    return "\n".join(lines).strip()


def wrap(text: str, width: int = WIDTH) -> str:
    """Each paragraph of ``text`` wrapped (a traceback is preformatted: nothing else wraps it)."""
    return "\n".join(textwrap.fill(p, width, break_on_hyphens=False, break_long_words=True)
                     if p.strip() else "" for p in text.split("\n"))


def split_cause(message: str) -> tuple[str, str]:
    """(the cause: the first sentence, the fix: the rest). Checker messages say what is wrong
    first, then what to do; a case in brackets ``[n=1000, ...]`` stays with its sentence."""
    text = " ".join(message.split())
    for m in re.finditer(r"[.;:](?= )|\.$", text):
        i = m.start()
        head = text[:i + 1]
        nested = sum(head.count(o) - head.count(c) for o, c in ("()", "[]", "{}")) > 0
        if i < 20 or nested or head.lower().endswith(("e.g.", "i.e.", "vs.")):
            continue
        cause, rest = head.strip(), text[i + 1:].strip()
        return (cause[:-1] + "." if cause[-1] in ":;" else cause), rest
    return text, ""


# The first sentence of a wrong answer's message (cudacourse.course.quiz.grade), in the catalogue:
# the summary says its own whole sentence for it and keeps the rest (the why) as the fix,
# instead of cutting the message at the colon inside "Question 2: Blocks for 1,000 elements".
QUIZ_WRONG = "{var} = {answer} is not the right answer to {header}. "


def _sentence_pattern(template: str, known: dict[str, str]) -> re.Pattern:
    """``template`` as a pattern for the start of a message: ``known`` placeholders as their
    exact text, the others as named groups; a final full stop must end a sentence."""
    parts, seen = [], set()
    for piece in re.split(r"(\{\w+\})", " ".join(template.split())):
        name = piece[1:-1] if re.fullmatch(r"\{\w+\}", piece) else None
        if name is None:
            parts.append(re.escape(piece))
        elif name in known:
            parts.append(re.escape(" ".join(known[name].split())))
        else:
            parts.append(f"(?P<{name}>.+?)" if name not in seen else ".+?")
            seen.add(name)
    # an English full stop ends a sentence only before a space (not in "x.y" or "1.5")
    end = r"(?=\s|$)" if template.rstrip().endswith(".") else ""
    return re.compile("".join(parts) + end)


def question_parts(message: str, header: str | None = None) -> tuple[str, str] | None:
    """(cause, fix) of a wrong answer's message: the cause one whole sentence of the
    catalogue (``{var} = {answer} is not the right answer.``) in the current language, the
    fix what the question's key says after the first sentence; None for another message.
    ``header``: the question's header as the message gives it ("Question 2: Blocks for 1,000
    elements"), where known (a title may hold a full stop of its own)."""
    text = " ".join(str(message).split())
    known = {"header": header} if header else {}
    for lang in dict.fromkeys((i18n.language(), *i18n.LANGUAGES)):  # a verdict of any edition
        m = _sentence_pattern(template_in(QUIZ_WRONG, lang), known).match(text)
        if m:
            return (T("{var} = {answer} is not the right answer.", var=m.group("var"),
                      answer=m.group("answer")), text[m.end():].strip())
    return None


_PLAIN_TEMPLATE = re.compile(r"\{(?!\w+\})")  # a replacement field with more than a name


def _in_language(d: Any, fallback: str) -> str:
    """A checker's message template (``message_text``) in the current language, when the
    catalogue translates it; else ``fallback`` (the text the checker showed). The template
    comes from the verdict process: only ``{name}`` fields and plain values are filled."""
    if not isinstance(d, dict) or not isinstance(d.get("template"), str):
        return fallback
    template, values = d["template"], d.get("values") or {}
    if _PLAIN_TEMPLATE.search(template) or not isinstance(values, dict) or any(
            not isinstance(v, (str, int, float)) for v in values.values()):
        return fallback
    if i18n.gettext(template) == template:
        return fallback
    return i18n.T(template, **values).shown()


def checker_parts(v: dict[str, Any]) -> tuple[str, str] | None:
    """(cause, fix) as the checker split them (a CheckFailure's diagnosis and hint, which
    the verdict records apart), the case in brackets after the cause; None for a failure
    that is not a checker's (an AssertionError, a crash)."""
    diagnosis = plain_message(v.get("diagnosis") or "")
    if not diagnosis:
        return None
    cause = _in_language(v.get("message_text"), diagnosis)
    fix = _in_language(v.get("hint_text"), plain_message(v.get("hint") or ""))
    if v.get("case"):
        cause = f"{cause} [{v['case']}]"
    return cause, fix


# --- the course's question bank, as data ---------------------------------------------------

@dataclass(frozen=True)
class QuestionText:
    qid: str
    header: str
    prompt: str
    choices: dict[str, str]
    kind: str
    unit: str

    def text(self, width: int = WIDTH) -> str:
        lines = [self.header, "", wrap(" ".join(self.prompt.split()), width), ""]
        lines += [textwrap.fill(f"({k}) {v}", width, initial_indent="  ",
                                subsequent_indent="      ") for k, v in self.choices.items()]
        return "\n".join(lines).rstrip() + "\n"


def question(qid: str, bank_dir: Path = QUIZ_BANK) -> QuestionText | None:
    """The question ``<lesson>.<id>`` from ``quizzes/<lesson>.toml``; None if unknown."""
    lesson, _, short = qid.partition(".")
    if not re.fullmatch(r"[\w]+", lesson or "-") or not short:
        return None
    path = bank_dir / f"{lesson}.toml"
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ours = _question_translations(lesson, bank_dir)
    for n, q in enumerate(data.get("question", []), 1):
        if q.get("id") == short:
            q = {**q, **{f: ours[f"q.{short}.{f}"] for f in ("title", "prompt")
                         if f"q.{short}.{f}" in ours}}
            if isinstance(q.get("choices"), dict):
                q["choices"] = {k: ours.get(f"q.{short}.choice.{k}", v)
                                for k, v in q["choices"].items()}
            title = str(q.get("title", "")).strip()
            return QuestionText(qid, T("Question {n}: {title}", n=n, title=title) if title
                                else T("Question {n}", n=n),
                                str(q.get("prompt", "")).strip(),
                                {str(k): str(v) for k, v in (q.get("choices") or {}).items()},
                                str(q.get("kind", "choice")), str(q.get("unit", "")))
    return None


def _question_translations(lesson: str, bank_dir: Path) -> dict[str, str]:
    """The question texts of ``lesson`` in the current language (its lesson translation
    file, ``locale/<lang>/lessons/<lesson>.po``, keyed ``q.<id>.<field>``); {} in English."""
    lang = i18n.language()
    if lang == "en":
        return {}
    path = bank_dir.parent / "locale" / lang / "lessons" / f"{lesson}.po"
    try:
        from babel.messages.pofile import read_po

        with open(path, "rb") as fh:
            po = read_po(fh)
    except (OSError, ValueError, ImportError):
        return {}
    return {m.context: m.string for m in po if m.context and m.context.startswith("q.")
            and isinstance(m.string, str) and m.string and not m.fuzzy}


# --- one graded cell -----------------------------------------------------------------------

@dataclass
class Entry:
    """What the summary says about one graded test cell."""

    grade_id: str
    title: str
    points: float
    earned: float
    status: str  # pass, fail, not_gradable, timeout, error, unanswered
    cause: str = ""
    fix: str = ""
    answer: str | None = None  # a question's answer as the learner wrote it
    explanation: str = ""
    question: bool = False

    @property
    def right(self) -> bool:
        return self.status == "pass"


def _meta(cell: Any) -> dict:
    return (cell.get("metadata") or {}).get("nbgrader") or {}


def _answer_value(source: str, var: str) -> str | None:
    """The literal the learner assigned to ``var`` (as written), or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == var
                                                for t in node.targets):
            return ast.get_source_segment(source, node.value)
    return None


def _unanswered(source: str) -> bool:
    body = [ln for ln in source.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return not body or bool(STUB.search(source))


def earned_points(v: dict[str, Any], points: float) -> float:
    """The points nbgrader gives the cell for verdict ``v`` (see grader/partial.py)."""
    if v.get("status") == "pass":
        if isinstance(v.get("partial"), (int, float)) and not isinstance(v["partial"], bool):
            return float(v["partial"])
        return points
    frac = v.get("credit")
    if v.get("status") == "fail" and isinstance(frac, (int, float)) and 0 < frac < 1:
        return round(float(frac) * points, 2)
    return 0.0


def _heading_before(cells: list, index: int) -> str:
    """The nearest heading above the cell: the exercise's own ("### Exercise: the block
    sum"), not its section's ("## 3. Reductions") when both open the same Markdown cell."""
    for cell in reversed(cells[:index]):
        if cell.get("cell_type") == "markdown":
            found = re.findall(r"^#{1,4}\s+(.+)$", cell.get("source", ""), re.M)
            if found:  # "## Exercise 1: write `vector_add`" -> "Exercise 1: write vector_add"
                return re.sub(r"`([^`]*)`", r"\1", found[-1]).strip()
    return ""


def entries(nb: Any, verdicts: dict[str, dict[str, Any]],
            bank_dir: Path = QUIZ_BANK) -> list[Entry]:
    """One :class:`Entry` per graded test cell of ``nb``, in notebook order."""
    cells = nb.cells
    answers = {_meta(c).get("grade_id"): c.get("source", "") for c in cells
               if c.get("cell_type") == "code" and _meta(c).get("solution")}
    out = []
    for i, cell in enumerate(cells):
        m = _meta(cell)
        if cell.get("cell_type") != "code" or not m.get("grade") or m.get("solution"):
            continue
        gid = str(m.get("grade_id"))
        v = verdicts.get(gid) or {"status": "error", "message": "no verdict for this cell"}
        points = float(m.get("points") or 0.0)
        message = plain_message(v.get("message", ""))
        quiz = GRADE.search(cell.get("source", ""))
        e = Entry(gid, "", points, earned_points(v, points), str(v.get("status")))
        if quiz:
            q = question(quiz.group(1), bank_dir)
            var = quiz.group(2)
            e.question, e.title = True, q.header if q else var
            src = answers.get(var, "")
            e.answer = _answer_value(src, var)
            said = plain_message(v.get("output", "")) if e.right else message
            if q is not None:  # "Question 2: ...: right." repeats what the summary says
                said = re.sub(rf"^\s*{re.escape(q.header)}\s*:\s*right\.\s*", "", said)
            e.explanation = " ".join(said.split())
            if not e.right and (e.answer is None and _unanswered(src)
                                or v.get("ename") == "NameError" and var in message):
                e.status, e.cause = "unanswered", T("The answer cell was left blank.")
                e.fix = T("Write {var} = ... in the answer cell above the test.", var=var)
        else:
            used = [a for a in answers if a and re.search(rf"\b{re.escape(a)}\b",
                                                           cell.get("source", ""))]
            e.title = _heading_before(cells, i) or (used[0] if used else gid)
            # (an answer cell that is gone is not starter code: intake names it missing)
            if not e.right and used and all(_unanswered(answers[a]) for a in used) and (
                    v.get("ename") in ("NameError", "NotImplementedError", "NotGradable")
                    or "NotImplementedError" in message) and "is missing" not in message:
                e.status = "unanswered"
                e.cause = T("The answer cell still holds the starter code.")
                e.fix = T("Write {name} in its answer cell.", name=used[0])
        if not e.right and not e.cause and e.question:
            e.cause, e.fix = question_parts(message, q.header if q else None) or (
                question_parts(message) if q else None) or (message or T(
                "{status}: no message.", status=v.get("status")), "")
        if not e.right and not e.cause:
            e.cause, e.fix = checker_parts(v) or (split_cause(message) if message else (
                T("{status}: no message.", status=v.get("status")), ""))
        out.append(e)
    return out


# --- what goes into the notebook -----------------------------------------------------------

def _points(e: Entry) -> str:
    return f"{e.earned:g} / {e.points:g}" if e.points > 0 else T("formative, no points")


def order(e: Entry) -> int:
    """Where a cell's line goes: the ones that lost points first, then formative questions
    answered wrong (they cost nothing), then the right ones; notebook order within each."""
    if e.points > 0 and e.earned < e.points:
        return 0
    return 1 if not e.right else 2


def summary_markdown(items: list[Entry], late_line: str | None = None,
                     penalty: float = 0.0) -> str:
    """The summary cell's markdown: the total (after the late ``penalty`` in points, as
    nbgrader's score on the same page), the late rule, then one line per graded cell, the
    ones that lost points first."""
    graded = [e for e in items if e.points > 0]
    before = sum(e.earned for e in graded)
    total = max(0.0, round(before - penalty, 6))
    most = sum(e.points for e in graded)
    wrong = [e for e in items if not e.right]
    lines = ["## " + T("Summary: {total} / {most} points", total=format(total, "g"),
                       most=format(most, "g"))
             + (T(" ({before} before the late penalty)", before=format(before, "g"))
                if penalty else "")
             + (T(", {k} of {n} graded cells to look at", k=len(wrong), n=len(items)) if wrong
                else T(", every graded cell right")), ""]
    if late_line:
        lines += ["**" + T("Late.") + "** " + md_escape(late_line), ""]
    for e in sorted(items, key=order):  # stable: notebook order within each
        link = f"[{md_escape(e.title)}](#{e.grade_id})"
        if e.right:
            verdict = T("right")
        elif e.status == "unanswered":
            verdict = T("unanswered")
        else:
            verdict = T("partly right") if e.earned > 0 else T("not right")
        line = f"- **{verdict}** ({_points(e)}): {link}"
        if e.question and e.answer is not None:
            line += ". " + T("Your answer: {answer}", answer=md_escape(e.answer))
        if not e.right:
            line += ". **" + T("Cause:") + "** " + md_escape(e.cause)
            if e.fix:
                line += " **" + T("Fix:") + "** " + md_escape(e.fix)
        elif e.explanation:
            line += f". {md_escape(e.explanation)}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def _reword_outputs(cell: Any, e: Entry) -> None:
    """A test cell's error shown as a wrapped message without the class name; a blank
    answer as 'unanswered'. The output stays an error: nbgrader scores by that."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            text = (f"{e.cause} {e.fix}".strip() if e.status == "unanswered"
                    else plain_message(out.get("evalue", "")))
            out["traceback"] = [wrap(T("Unanswered. {text}", text=text)
                                     if e.status == "unanswered" else text)]
            if e.status == "unanswered":
                out["ename"], out["evalue"] = "Unanswered", text
        elif out.get("output_type") == "stream":
            out["text"] = wrap(plain_message(out.get("text", ""))) + "\n"


def annotate(nb: Any, verdicts: dict[str, dict[str, Any]], *,
             late: dict[str, Any] | None = None, bank_dir: Path = QUIZ_BANK) -> list[Entry]:
    """Put the summary on top of ``nb``, reword its test cells' messages and show each
    question's text under its ``quiz.ask`` cell. ``late`` is :func:`policy.lateness`'s
    record (its penalty in points is worked out here: nbgrader applies it after this step).
    Returns the entries."""
    with language(of_notebook(nb)):  # the summary in the notebook's language
        return _annotate(nb, verdicts, late, bank_dir)


def _annotate(nb: Any, verdicts: dict[str, dict[str, Any]], late: dict[str, Any] | None,
              bank_dir: Path) -> list[Entry]:
    from .policy import late_line

    items = entries(nb, verdicts, bank_dir)
    if late and late.get("late") and late.get("percent"):
        total = sum(e.earned for e in items if e.points > 0)
        late = {**late, "penalty": round(total * float(late["percent"]) / 100.0, 6)}
    by_id = {e.grade_id: e for e in items}
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        gid = _meta(cell).get("grade_id")
        if gid in by_id and _meta(cell).get("grade"):
            _reword_outputs(cell, by_id[gid])
            continue
        m = ASK.match(cell.get("source", ""))
        q = question(m.group(1), bank_dir) if m else None
        if q is not None:
            cell["outputs"] = [nbformat.from_dict({
                "output_type": "display_data", "metadata": {},
                "data": {"text/plain": q.text()}})]
    penalty = float((late or {}).get("penalty") or 0.0) if (late or {}).get("late") else 0.0
    cell = nbformat.v4.new_markdown_cell(summary_markdown(items, late_line(late, T), penalty))
    cell.metadata["cudacourse"] = {"summary": True}
    if nb.get("nbformat", 4) == 4 and nb.get("nbformat_minor", 5) >= 5:
        cell["id"] = SUMMARY_ID
    else:
        cell.pop("id", None)
    nb.cells.insert(0, cell)
    return items


def first_cause(verdicts: dict[str, dict[str, Any]],
                points: dict[str, float] | None = None) -> str:
    """One line for a grade table's 'reason' column: the first cell that lost points (with
    ``points``, cells worth points before formative ones)."""
    order = sorted(verdicts, key=lambda g: not (points or {}).get(g, 1.0) > 0)
    for gid in order:
        v = verdicts[gid]
        if isinstance(v, dict) and v.get("status") != "pass":
            message = plain_message(v.get("message", ""))
            blank = re.fullmatch(r"name '(\w+)' is not defined", message)
            if blank:
                return f"{gid}: unanswered ({blank.group(1)} not written)"
            parts = checker_parts(v) or question_parts(message)  # whole sentences
            cause = parts[0] if parts else split_cause(message)[0]
            return f"{gid}: {cause}" if cause else f"{gid}: {v.get('status')}"
    return ""


def first_lost(autograded: Path) -> str:
    """The first cell that lost points in the ``*.grading.json`` records of one autograded
    submission (for the grade table's reason column); '' when none did."""
    for path in sorted(Path(autograded).glob("*.grading.json")):
        try:
            verdicts = json.loads(path.read_text()).get("verdicts") or {}
        except (OSError, ValueError, AttributeError):
            continue
        points: dict[str, float] = {}
        graded = path.with_name(path.name[:-len(".grading.json")] + ".ipynb")
        try:
            for cell in nbformat.read(graded, as_version=4).cells:
                if _meta(cell).get("grade"):
                    points[str(_meta(cell).get("grade_id"))] = float(
                        _meta(cell).get("points") or 0.0)
        except (OSError, ValueError, TypeError):
            points = {}
        found = first_cause(verdicts, points) if isinstance(verdicts, dict) else ""
        if found:
            return found
    return ""


__all__ = ["Entry", "QuestionText", "annotate", "checker_parts", "question_parts", "order",
           "earned_points", "entries", "first_cause", "first_lost", "md_escape",
           "plain_message", "question", "split_cause", "summary_markdown", "wrap"]
