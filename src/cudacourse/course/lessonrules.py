"""Every rule a lesson must keep, in one place: ``cudacourse lesson check`` reports each one a
lesson breaks, with its fix; docs/authoring.md's *Rules a lesson keeps* is generated from
:data:`RULES` (``python -m cudacourse.course.lessonrules doc``; tests/test_docs.py holds the two
equal); the tests that hold the course's lessons to a rule call :func:`check` with it.

A rule reads files only (the lesson source, its question bank and key, its checker module's
text, the translation files): no Numba, no import of the checker. Each check returns
``(where, what)`` pairs; :func:`check` turns them into :class:`Problem` lines::

    [hidden_cases] lessons/07_tensor.py, test_mma: no hidden tests call check_mma again.
      Fix: add ### BEGIN HIDDEN TESTS ... with hidden=cudacourse.check.Cases(seed=..., ...)
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from . import lessons as _lessons
from . import lessonsource
from ..i18n import catalog, glossary, translations

PACKAGE = "src/cudacourse"
MAX_SHARE = 0.40  # no answer letter right (and no right choice longest) in more of them
PREDICT_SHARE = 0.8  # of the questions, at least this share (rounded down) predict/compute
SPREAD_FROM = 3  # multiple-choice questions from which the position rules apply
_CAUSE = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Rule:
    id: str
    text: str  # the rule, as docs/authoring.md states it (Markdown)
    fix: str  # what to do, in one sentence
    check: Callable[["Lesson"], Iterable[tuple[str, str]]]


@dataclass(frozen=True)
class Problem:
    rule: str
    where: str
    what: str
    fix: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.where}: {self.what}\n  Fix: {self.fix}"


class Lesson:
    """What the rules read of one lesson ``stem`` of the course at ``root``."""

    def __init__(self, root: Path, stem: str) -> None:
        self.root, self.stem = Path(root), stem
        self.bank_path = self.root / PACKAGE / "quizzes" / f"{stem}.toml"
        self.key_path = self.root / "lessons" / "quizkeys" / f"{stem}.toml"
        self.source_path = self.root / "lessons" / f"{stem}.py"
        self._entry: _lessons.Lesson | None = None
        self.entry_error = ""
        try:
            self._entry = _lessons._entry(self.bank_path)
        except (_lessons.RegistryError, FileNotFoundError) as exc:
            self.entry_error = str(exc)

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    @property
    def entry(self) -> _lessons.Lesson | None:
        return self._entry

    @property
    def checker_path(self) -> Path | None:
        return (self.root / PACKAGE / "check" / f"{self._entry.checker}.py"
                if self._entry else None)

    def checker_text(self) -> str:
        p = self.checker_path
        return p.read_text(encoding="utf-8") if p is not None and p.exists() else ""

    @functools.lru_cache(maxsize=None)  # noqa: B019 - one Lesson per check: freed with it
    def cells(self) -> list:
        if not self.source_path.exists():
            return []
        try:
            return lessonsource.parse(self.source_path.read_text(encoding="utf-8"),
                                      self.source_path.name)
        except lessonsource.LessonSyntaxError:
            return []

    @functools.lru_cache(maxsize=None)  # noqa: B019
    def bank(self) -> dict:
        try:
            return tomllib.loads(self.bank_path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            return {}

    @functools.lru_cache(maxsize=None)  # noqa: B019
    def keys(self) -> dict[str, dict]:
        try:
            data = tomllib.loads(self.key_path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            return {}
        return {k.get("id"): k for k in data.get("key", []) if isinstance(k, dict)}

    def questions(self) -> list[dict]:
        return [q for q in self.bank().get("question", []) if isinstance(q, dict)]

    def checkers(self) -> list[str]:
        p = self.checker_path
        if p is None or not p.exists():
            return []
        _lessons._checker_names.cache_clear()
        try:
            return _lessons._checker_names(p)
        except SyntaxError:
            return []


# --- the rules ------------------------------------------------------------------------------

def _entry(les: Lesson):
    if les.entry_error:
        yield les.rel(les.bank_path), les.entry_error


def _files(les: Lesson):
    need = [les.source_path, les.key_path]
    if les.entry:
        need.append(les.checker_path)
    for p in need:
        if not p.exists():
            yield les.rel(p), "missing"
    for t in les.entry.topics if les.entry else ():
        if _lessons.module_path(t, les.root / PACKAGE) is None:
            yield les.rel(les.bank_path), f"topics names {t!r}, a module the package lacks"


def _setup_cell(les: Lesson):
    cells = les.cells()
    if not les.source_path.exists():
        return
    if not cells:
        yield les.rel(les.source_path), "no cells (or a cell marker it cannot read)"
        return
    code = [c for c in cells if c.kind != "markdown"]
    first = code[0] if code else None
    if first is None or first.kind != "readonly" or first.attrs.get("id") != "setup":
        yield les.rel(les.source_path), "the first code cell is not `# %% [readonly] id=setup`"
        return
    lines = [ln.strip() for ln in first.source.splitlines() if ln.strip()
             and not ln.strip().startswith("#")]
    if lines[:2] != ["import cudacourse", "cudacourse.setup()"] and not (
            lines[:1] == ["import cudacourse"] and lines[1:2] and
            lines[1].startswith("cudacourse.setup(")):
        yield les.rel(les.source_path), ("the setup cell does not start with `import "
                                         "cudacourse` then `cudacourse.setup()`")
    if "import cudacourse.check" not in lines:
        yield les.rel(les.source_path), "the setup cell lacks `import cudacourse.check`"
    if not any(re.match(r"from cudacourse(\.\w+)? import (.*, )?quiz\b", ln) for ln in lines):
        yield les.rel(les.source_path), "the setup cell lacks `from cudacourse import quiz`"


def _test_cells(les: Lesson) -> list:
    return [c for c in les.cells() if c.kind == "tests"]


# a call of a checker, group 1 its dotted prefix ("cudacourse.check." or "" for a bare name)
_CALL = re.compile(r"(?<![\w.])((?:\w+\.)*)(check_\w+)\(")


def _checker_called(les: Lesson):
    names = les.checkers()
    called = set()
    for cell in _test_cells(les):
        for m in _CALL.finditer(cell.source):
            if m.group(1) == "" and m.group(2) in names:
                yield f"{les.rel(les.source_path)}, {cell.attrs.get('id')}", (
                    f"calls {m.group(2)} by a bare name a learner cell could rebind")
            if m.group(1) == "cudacourse.check.":
                called.add(m.group(2))
    for name in names:
        if name not in called:
            yield les.rel(les.source_path), f"no [tests] cell calls {name}"


_HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", re.S)


def _hidden_cases(les: Lesson):
    names = set(les.checkers())
    package = "\n".join(p.read_text(encoding="utf-8", errors="replace")
                        for p in (les.root / PACKAGE).rglob("*.py")) if names else ""
    for cell in _test_cells(les):
        visible = {m.group(2) for m in _CALL.finditer(_HIDDEN.sub("", cell.source))} & names
        hidden = "".join(_HIDDEN.findall(cell.source))
        where = f"{les.rel(les.source_path)}, {cell.attrs.get('id')}"
        for name in sorted(visible):
            calls = re.split(rf"(?<![\w.])cudacourse\.check\.{name}\(", hidden)[1:]
            if not calls:
                yield where, f"no hidden tests call cudacourse.check.{name} again"
                continue
            for args in calls:  # the text after each call, to the next one
                seed = re.search(r"hidden\s*=\s*cudacourse\.check\.Cases\(\s*seed\s*=\s*(\d+)",
                                 args)
                if not seed:
                    yield where, (f"the hidden {name}(...) has no "
                                  "hidden=cudacourse.check.Cases(seed=..., sizes=[...])")
                elif re.search(rf"\b{seed.group(1)}\b", package):
                    yield where, f"the hidden seed {seed.group(1)} appears in the package"


def _points(les: Lesson):
    p = les.checker_path
    if p is None or not p.exists():
        return
    try:
        specs = _lessons.spec_fields(p)
    except SyntaxError:
        return
    for cell in _test_cells(les):
        for m in _CALL.finditer(_HIDDEN.sub("", cell.source)):
            spec = specs.get(m.group(2))
            if spec is None or "points" not in spec:
                continue
            got = cell.attrs.get("points")
            if str(spec["points"]) != str(got):
                yield f"{les.rel(les.source_path)}, {cell.attrs.get('id')}", (
                    f"points={got}, but the spec of {m.group(2)} says points={spec['points']}")


def causes_used(source: str) -> set[str]:
    """The cause ids a module's text raises: ``fail("cause", ...)``, ``cause="..."``, and
    ``return ("cause", T(...))`` (a diagnosis handed to ``fail`` by its caller)."""
    used = set(re.findall(r'cause="([a-z][a-z0-9_]+)"', source))
    used |= set(re.findall(r'\bfail\(\s*"([a-z][a-z0-9_]+)",', source))
    used |= set(re.findall(r'return \(\s*"([a-z][a-z0-9_]+)",\s*(?:T\(|f?")', source))
    return used


def known_causes(root: Path) -> dict[str, str]:
    """``CAUSES`` of ``check/_failure.py`` and every exercise spec's own ``causes={...}``."""
    return catalog.causes(Path(root))


def _causes(les: Lesson):
    p = les.checker_path
    if p is None or not p.exists():
        return
    text = les.checker_text()
    known = known_causes(les.root)
    used = causes_used(text)
    try:
        for fields in _lessons.spec_fields(p).values():
            for cause in fields.get("causes") or {}:
                if not _CAUSE.match(cause):
                    yield les.rel(p), f"the cause id {cause!r} is not lower_snake_case"
        used |= {c for v in _lessons._declared_technique(p).values() for c in v}
    except (SyntaxError, _lessons.RegistryError) as exc:
        yield les.rel(p), str(exc)
    for cause in sorted(used - set(known)):
        yield les.rel(p), f"raises the cause {cause!r}, which no CAUSES entry or spec declares"


def _choice_questions(les: Lesson) -> list[tuple[dict, dict]]:
    keys = les.keys()
    return [(q, keys.get(q.get("id"), {})) for q in les.questions()
            if q.get("kind", "choice") == "choice"]


def _questions(les: Lesson):
    qs, keys = les.questions(), les.keys()
    where = les.rel(les.bank_path)
    if not qs:
        yield where, "no [[question]]"
    for q in qs:
        qid = q.get("id", "?")
        key = keys.get(qid)
        if key is None:
            yield les.rel(les.key_path), f"no [[key]] for the question {qid!r}"
            continue
        missing = [f for f in ("title", "prompt") if not q.get(f)] + \
            [f for f in ("answer", "explain", "hint") if f not in key or key[f] in ("", None)]
        if missing:
            yield f"{where}, {qid}", f"lacks {', '.join(missing)}"
        if q.get("kind") == "number":
            if not float(q.get("tol", 0)) > 0:
                yield f"{where}, {qid}", "a number question needs tol > 0"
            if len(key.get("wrong", [])) < 2:
                yield f"{les.rel(les.key_path)}, {qid}", ("a number question needs at least "
                                                          "two known wrong values")
        else:
            why = set((key.get("why") or {}).keys())
            choices = set((q.get("choices") or {}).keys())
            if why != choices:
                yield f"{les.rel(les.key_path)}, {qid}", (
                    f"a why for every choice: missing {sorted(choices - why)}"
                    + (f", unknown {sorted(why - choices)}" if why - choices else ""))
    unknown = sorted(set(keys) - {q.get("id") for q in qs})
    if unknown:
        yield les.rel(les.key_path), f"keys for questions the bank lacks: {unknown}"


def _predict(les: Lesson):
    qs = les.questions()
    want = int(len(qs) * PREDICT_SHARE)
    have = sum(1 for q in qs if q.get("predict"))
    if have < want:
        yield les.rel(les.bank_path), (f"{have} of {len(qs)} questions predict or compute "
                                       f"(predict = true); want at least {want}")


def _letters(les: Lesson):
    pairs = _choice_questions(les)
    if len(pairs) < SPREAD_FROM:
        return
    letters = [str(k.get("answer", "")).split(",")[0].strip() for _, k in pairs]
    for letter in sorted(set(letters)):
        if letters.count(letter) / len(pairs) > MAX_SHARE:
            yield les.rel(les.key_path), (f"({letter}) is right in {letters.count(letter)} of "
                                          f"{len(pairs)} multiple-choice questions")
    longest = [q.get("id") for q, k in pairs if q.get("choices") and (right := str(
        k.get("answer", "")).split(",")[0].strip()) in q["choices"] and len(
        q["choices"][right]) >= max(len(v) for c, v in q["choices"].items() if c != right)]
    if len(longest) / len(pairs) > MAX_SHARE:
        yield les.rel(les.key_path), f"the right choice is the longest in {longest}"


def _asked_in_order(les: Lesson):
    cells = les.cells()
    if not cells:
        return
    qids = [f"{les.stem}.{q.get('id')}" for q in les.questions()]
    asked = [m for c in cells for m in re.findall(r'quiz\.ask\("([\w.]+)"', c.source)]
    if asked != qids:
        yield les.rel(les.source_path), f"asks {asked}; the bank's order is {qids}"
    by_id = {c.attrs.get("id"): c for c in cells if c.attrs.get("id")}
    for n, q in enumerate(les.questions(), 1):
        var = f"answer_{q.get('id')}"
        cell = by_id.get(var)
        if cell is None or cell.kind != "solution":
            yield les.rel(les.source_path), f"no `# %% [solution] id={var}` answer cell"
        elif f"# Question {n}: {q.get('title', '')}. Answer as: {var} = " not in cell.source:
            yield les.rel(les.source_path), (f"the answer cell {var} lacks its comment "
                                             f"`# Question {n}: {q.get('title', '')}. Answer "
                                             f"as: {var} = ...`")
        test = by_id.get(f"test_{var}")
        if test is None or test.kind != "tests" or \
                f'quiz.grade("{les.stem}.{q.get("id")}", {var}' not in test.source:
            yield les.rel(les.source_path), (f"no `# %% [tests] id=test_{var}` cell calling "
                                             f'quiz.grade("{les.stem}.{q.get("id")}", {var})')


def _translations(les: Lesson):
    if not les.source_path.exists() or not les.bank_path.exists():
        return
    for path in (translations.po_path(les.stem, "ja", les.root),
                 translations.key_po_path(les.stem, "ja", les.root)):
        if not path.exists():
            yield les.rel(path), "missing (the Japanese edition)"
    try:
        st = translations.file_status(les.stem, "ja", les.root)
    except Exception as exc:  # noqa: BLE001 - a source it cannot read: said, not raised
        yield les.rel(les.source_path), f"cannot read its translation units ({exc})"
        return
    if not st.ok:
        yield les.stem, st.describe("ja").split(": ", 1)[1]
    for path in (translations.po_path(les.stem, "ja", les.root),
                 translations.key_po_path(les.stem, "ja", les.root)):
        if path.exists():
            for key, m in translations.entries(translations.read(path)).items():
                for p in glossary.problems(m.id, m.string, "ja") if m.string else ():
                    yield f"{les.rel(path)}, {key}", p


def message_templates(source: str) -> list[str]:
    """The ``T("...")`` templates of a module's text (adjacent literals joined)."""
    out = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "T" and \
                node.args and isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str):
            out.append(node.args[0].value)
    return out


def _messages_translated(les: Lesson):
    text = les.checker_text()
    if not text:
        return
    path = catalog.po_path(les.root, "ja")
    if not path.exists():
        yield les.rel(path), "no Japanese message catalogue"
        return
    have = {m.id: m for m in catalog.read(path) if m.id}
    try:
        templates = message_templates(text)
    except SyntaxError:
        return
    try:  # a spec's own causes: their meaning heads a Japanese diagnosis
        templates += [meaning for fields in _lessons.spec_fields(les.checker_path).values()
                      for meaning in (fields.get("causes") or {}).values()]
    except SyntaxError:
        pass
    for t in templates:
        m = have.get(t)
        if m is None or not m.string or m.fuzzy:
            yield les.rel(les.checker_path), f"no Japanese for {t!r}"


def _registry_listed(les: Lesson):
    if les.entry is None:
        return
    readme = les.root / "README.md"
    if readme.exists() and les.entry.readme_row() not in readme.read_text(encoding="utf-8"):
        yield "README.md", f"the lessons table lacks `{les.entry.readme_row()}`"
    pyproject = les.root / "pyproject.toml"
    if pyproject.exists() and les.entry.marker_line() not in pyproject.read_text(
            encoding="utf-8"):
        yield "pyproject.toml", f"the pytest markers lack `{les.entry.marker_line()}`"


def _built(les: Lesson):
    if les.entry is None:
        return
    for rel in (les.entry.master, les.entry.release):
        if not (les.root / rel).exists():
            yield rel, "not built"


RULES: tuple[Rule, ...] = (
    Rule("entry", "The question bank `src/cudacourse/quizzes/NN_topic.toml` has a `[lesson]` "
         "table, the lesson's registry entry, with every field (`number`, `title`, `summary`, "
         "`you_write`, `topics`, `checker`, `plots`, `marker`, `terms`), its number that of "
         "the file name; lessons are numbered 1, 2, ... without gaps.",
         "complete the [lesson] table as `cudacourse lesson new` writes it.", _entry),
    Rule("files", "Every file the entry names exists: `lessons/NN_topic.py`, "
         "`lessons/quizkeys/NN_topic.toml`, `src/cudacourse/check/<checker>.py` and "
         "`src/cudacourse/kernels/<topic>.py` for each of its `topics`.",
         "create the file (`cudacourse lesson new NN_topic` scaffolds all five).", _files),
    Rule("setup_cell", "The lesson's first code cell is `# %% [readonly] id=setup`, starting "
         "`import cudacourse` then `cudacourse.setup()`, and imports `cudacourse.check` and "
         "`from cudacourse import quiz`.",
         "start the lesson with the setup cell of `cudacourse lesson new`'s scaffold.",
         _setup_cell),
    Rule("checker_called", "Every `check_*` of the checker module (a `def` or an exercise "
         "spec, `check_x = K.exercise(...)`) is called by a `[tests]` cell, by its full name "
         "`cudacourse.check.check_<exercise>(...)`, never by a bare name.",
         "call it as cudacourse.check.check_<exercise>(<kernel>) in the exercise's [tests] "
         "cell.", _checker_called),
    Rule("hidden_cases", "Every test cell that calls a checker calls it again inside `### BEGIN "
         "HIDDEN TESTS` / `### END HIDDEN TESTS` with `hidden=cudacourse.check.Cases(seed=..., "
         "sizes=[...])`, a seed no file of the package holds (sizes in the form of the "
         "visible cases; tests/test_hidden_cases.py watches `check._cases.resolve`, which "
         "`K.resolve` and every spec reach).",
         "add ### BEGIN HIDDEN TESTS / cudacourse.check.check_<exercise>(<kernel>, "
         "hidden=cudacourse.check.Cases(seed=<new>, sizes=[...])) / ### END HIDDEN TESTS.",
         _hidden_cases),
    Rule("points", "An exercise spec's `points` are its test cell's `points=`.",
         "make the cell marker's points=N and the spec's points=N agree.", _points),
    Rule("causes", "Every cause a checker raises (`K.fail(\"cause\", ...)`, its "
         "`TECHNIQUE`, its specs' `observe`) is in `check/_failure.py`'s `CAUSES` or in a "
         "spec's `causes={\"id\": \"what it means\"}` (lower_snake_case).",
         "declare it in the spec's causes={...} (or in CAUSES when two lessons share it), "
         "then `cudacourse i18n update` and translate its heading.", _causes),
    Rule("questions", "The bank has at least one `[[question]]`, each with a title and a "
         "prompt, and a `[[key]]` in `lessons/quizkeys/NN_topic.toml` with `answer`, "
         "`explain`, `hint` and a `why` for every choice (a number: `tol` > 0 and at least "
         "two `wrong` values); no key without its question.",
         "add the missing field to the question or its key (see *Questions*).", _questions),
    Rule("predict", f"At least {PREDICT_SHARE:.0%} of the questions (rounded down) ask to "
         "predict or compute (`predict = true`).",
         "rewrite a recall question as a prediction (what will this print, how many ...) "
         "and mark it predict = true.", _predict),
    Rule("letters", f"With {SPREAD_FROM} or more multiple-choice questions, no letter is right "
         f"in more than {MAX_SHARE:.0%} of them, and the right choice is the longest in at "
         f"most {MAX_SHARE:.0%}.",
         "reorder choices (and their whys) so the right letters vary; shorten a right "
         "choice or lengthen a wrong one.", _letters),
    Rule("asked_in_order", "The lesson asks the bank's questions in its order, each in three "
         "cells: `quiz.ask(\"NN_topic.<id>\")`; `# %% [solution] id=answer_<id>` whose first "
         "line is `# Question N: <title>. Answer as: answer_<id> = ...`; `# %% [tests] "
         "id=test_answer_<id>` calling `quiz.grade(\"NN_topic.<id>\", answer_<id>)`.",
         "copy the question's three cells from `cudacourse lesson new`'s scaffold, in the "
         "bank's order.", _asked_in_order),
    Rule("translations", "The Japanese edition: `src/cudacourse/locale/ja/lessons/NN_topic.po` "
         "and `lessons/quizkeys/ja/NN_topic.po` hold a current translation of every markdown "
         "cell, question and key text, following the glossary (code, in backticks or not, "
         "asks for no term).",
         "run `cudacourse i18n update`, translate the entries it lists, remove `fuzzy`, run "
         "it again.", _translations),
    Rule("messages_translated", "Every message template `T(\"...\")` of the checker module, "
         "and what each of its specs' own causes means, has a Japanese translation in "
         "`src/cudacourse/locale/ja/LC_MESSAGES/cudacourse.po` (a spec's own messages are the "
         "kit's, already translated; its `formula` and alternatives' labels are shown as "
         "written: code such as `x[i] + c`, or a `T(\"...\")`).",
         "run `cudacourse i18n update`, translate the new msgids in cudacourse.po, run it "
         "again.", _messages_translated),
    Rule("registry_listed", "The README's lessons table and `pyproject.toml`'s pytest markers "
         "list the lesson as `python -m cudacourse.course.lessons readme|markers` prints them "
         "(`cudacourse lesson new` writes both).",
         "paste `python -m cudacourse.course.lessons readme` into README.md and `python -m "
         "cudacourse.course.lessons markers` into pyproject.toml.", _registry_listed),
    Rule("built", "The master `solutions/NN_topic/NN_topic.ipynb` and the learner copy "
         "`notebooks/NN_topic/NN_topic.ipynb` exist (tests/test_notebooks.py holds them "
         "fresh).", "run `cudacourse build NN`.", _built),
)
BY_ID = {rule.id: rule for rule in RULES}


def check(stem: str, root: Path, rules: Iterable[str] | None = None) -> list[Problem]:
    """Every problem of the lesson ``stem`` of the course at ``root``, under ``rules`` (ids;
    all by default)."""
    les = Lesson(Path(root), stem)
    out = []
    for rule in (BY_ID[r] for r in rules) if rules is not None else RULES:
        if rule.id != "entry" and les.entry_error and rule.id in ("files", "points", "causes",
                                                                  "registry_listed", "built"):
            continue  # what needs the entry waits for it
        for where, what in rule.check(les):
            out.append(Problem(rule.id, where, what, rule.fix))
    return out


def stems(root: Path) -> list[str]:
    """The lessons of the course at ``root``: its question banks' stems, in order."""
    return sorted(p.stem for p in (Path(root) / PACKAGE / "quizzes").glob("[0-9][0-9]_*.toml"))


DOC_BEGIN = "<!-- rules: generated by `python -m cudacourse.course.lessonrules doc`; edit lessonrules.py -->"
DOC_END = "<!-- end of the generated rules -->"


def doc() -> str:
    """docs/authoring.md's list of rules, between its markers."""
    lines = [DOC_BEGIN, ""]
    for rule in RULES:
        lines.append(f"- **`{rule.id}`**: {rule.text} *Fix:* {rule.fix}")
    return "\n".join(lines + ["", DOC_END])


def write_doc(path: Path) -> bool:
    """Replace the generated block of ``path`` (docs/authoring.md) with :func:`doc`; True when
    it changed."""
    text = path.read_text(encoding="utf-8")
    start, end = text.index(DOC_BEGIN), text.index(DOC_END) + len(DOC_END)
    new = text[:start] + doc() + text[end:]
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str] | None = None) -> int:
    """``doc``: print the rules as docs/authoring.md lists them; ``doc --write FILE``: put
    them into FILE's generated block."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["doc"]:
        print(doc())
        return 0
    if len(args) == 3 and args[:2] == ["doc", "--write"]:
        print(("rewrote " if write_doc(Path(args[2])) else "unchanged ") + args[2])
        return 0
    print("usage: python -m cudacourse.course.lessonrules doc [--write docs/authoring.md]",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
