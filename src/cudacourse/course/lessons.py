"""The registry of lessons: one entry per lesson, from which every list of lessons derives.

A lesson's entry is the ``[lesson]`` table of its question bank,
``cudacourse/quizzes/<stem>.toml`` (the one file of a lesson that is data, in the package,
and that every lesson has)::

    [lesson]
    number = 7
    title = 'Scans'                       # the README row: title, summary, you_write
    summary = 'prefix sums in a block'
    you_write = '`block_scan`'
    topics = ['scan']                     # modules cudacourse.<topic> the lesson teaches with
    checker = 'scan'                      # its checkers: cudacourse/check/<checker>.py
    plots = []                            # modules whose plots it draws
    marker = 'scans'                      # pytest marker lesson7's description
    terms = ['prefix sum']                # terms defined at their first use (test_prose)

What the entry does not say is read from the files it names, never copied: the checkers are
the ``check_*`` functions of ``check/<checker>.py``, and their technique causes the
``TECHNIQUE`` declaration at the top of that module (:func:`technique`; the grader's partial
credit, :mod:`cudacourse.grader.partial`, uses it). ``cudacourse.check`` imports the checker
modules in the registry's order; the README table and the pytest markers in
``pyproject.toml`` are printed from here and ``tests/test_lessons.py`` fails when either
differs::

    python -m cudacourse.course.lessons readme     # the README's lessons table
    python -m cudacourse.course.lessons markers    # the lesson lines of [tool.pytest.ini_options]

This module reads files only (standard library): grading processes and the checkers import
it without importing Numba.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# src/cudacourse, wherever in the package this module sits
PACKAGE_DIR = next(p for p in Path(__file__).resolve().parents if p.name == "cudacourse")
BANKS = PACKAGE_DIR / "quizzes"
CHECKERS = PACKAGE_DIR / "check"

_FIELDS = {"number": int, "title": str, "summary": str, "you_write": str, "topics": list,
           "checker": str, "plots": list, "marker": str, "terms": list}


# What each technique an exercise spec observes (``observe=(...)`` of
# ``cudacourse.check.spec.exercise``) may raise after the case's values matched.
OBSERVED_CAUSES: dict[str, tuple[str, ...]] = {
    "spread": ("serial_work", "redundant_work"),  # each element written once, by its thread
}


# The packages that hold the modules a registry entry names by their short name (``topics``,
# ``plots``, ``const.<module>`` of the prose): the package itself, then its layers.
LAYERS = ("", "kernels.", "runtime.", "course.")


def module_of(name: str, package_dir: Path | None = None) -> str:
    """The full name of the package's module ``name`` (``vector``, ``viz.threads``), found
    in the package or one of its layers (``cudacourse.kernels.vector``)."""
    base = package_dir or PACKAGE_DIR
    for layer in LAYERS:
        rel = Path(*(layer + name).split("."))
        if (base / rel.with_suffix(".py")).is_file() or (base / rel / "__init__.py").is_file():
            return f"cudacourse.{layer}{name}"
    raise RegistryError(f"no module {name} in the package (nor in {', '.join(LAYERS[1:])})")


def module_path(name: str, package_dir: Path | None = None) -> Path | None:
    """The file of the package's module ``name``; None when there is none."""
    base = package_dir or PACKAGE_DIR
    try:
        full = module_of(name, base)
    except RegistryError:
        return None
    rel = Path(*full.split(".")[1:])
    return base / rel.with_suffix(".py") if (base / rel.with_suffix(".py")).is_file() \
        else base / rel / "__init__.py"


class RegistryError(ValueError):
    """A lesson's entry is missing, incomplete or names a file that is not there."""


@dataclass(frozen=True)
class Lesson:
    number: int
    stem: str  # lessons/<stem>.py; also the nbgrader assignment name and the bank's name
    title: str
    summary: str  # after the title in the README table
    you_write: str  # the README table's last column (Markdown)
    topics: tuple[str, ...]  # modules under cudacourse/ that the lesson teaches with
    checker: str  # its checker module: cudacourse/check/<checker>.py
    plots: tuple[str, ...]  # modules whose plots the lesson draws
    marker_text: str  # what ``pytest --markers`` says about the marker
    terms: tuple[str, ...] = ()  # regexes of the terms its prose defines at their first use

    @property
    def marker(self) -> str:
        return f"lesson{self.number}"

    # Where its files are, relative to the course root (the question bank: cudacourse/quizzes)
    source = property(lambda self: f"lessons/{self.stem}.py")
    master = property(lambda self: f"solutions/{self.stem}/{self.stem}.ipynb")
    release = property(lambda self: f"notebooks/{self.stem}/{self.stem}.ipynb")
    questions = property(lambda self: f"{self.stem}.toml")
    checker_module = property(lambda self: f"cudacourse.check.{self.checker}")
    checker_path = property(lambda self: CHECKERS / f"{self.checker}.py")

    @property
    def checkers(self) -> tuple[str, ...]:
        """The ``check_*`` functions its checker module defines, in their order there."""
        return tuple(_checker_names(self.checker_path))

    @property
    def technique(self) -> dict[str, frozenset[str]]:
        """The checker module's ``TECHNIQUE``: checker -> causes it raises only after the
        case's values matched the reference."""
        return _declared_technique(self.checker_path)

    def readme_row(self) -> str:
        return (f"| {self.number} | [{self.title}]({self.release}): {self.summary} | "
                f"{self.you_write} |")

    def marker_line(self) -> str:
        return f"{self.marker}: lesson {self.number}, {self.marker_text}"


def _module_tree(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), str(path))
    except FileNotFoundError:
        raise RegistryError(f"no checker module {path}") from None


def _spec_calls(tree: ast.Module) -> dict[str, ast.Call]:
    """``check_<name> = K.exercise(...)`` assignments at a module's top level (exercise
    specs), by the checker's name."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and \
                node.targets[0].id.startswith("check_") and isinstance(node.value, ast.Call):
            func = node.value.func
            if getattr(func, "attr", getattr(func, "id", None)) == "exercise":
                out[node.targets[0].id] = node.value
    return out


def spec_fields(path: Path) -> dict[str, dict]:
    """The literal keywords of each exercise spec in a checker module (``points``,
    ``observe``, ``causes``, ...), read without importing it."""
    out = {}
    for name, call in _spec_calls(_module_tree(path)).items():
        fields = {}
        for kw in call.keywords:
            try:
                fields[kw.arg] = ast.literal_eval(kw.value)
            except ValueError:
                fields[kw.arg] = None  # not a literal (a function, a generator): present
        out[name] = fields
    return out


@lru_cache(maxsize=None)
def _checker_names(path: Path) -> list[str]:
    tree = _module_tree(path)
    specs = _spec_calls(tree)
    return [node.name if isinstance(node, ast.FunctionDef) else node.targets[0].id
            for node in tree.body
            if (isinstance(node, ast.FunctionDef) and node.name.startswith("check_"))
            or (isinstance(node, ast.Assign) and node.value in specs.values())]


@lru_cache(maxsize=None)
def _declared_technique(path: Path) -> dict[str, frozenset[str]]:
    """The literal ``TECHNIQUE = {...}`` at the top level of a checker module, read without
    importing it (so without Numba); {} when the module declares none."""
    declared: dict[str, frozenset[str]] = {
        name: frozenset(c for o in (fields.get("observe", ("spread",)) or ())
                        for c in OBSERVED_CAUSES.get(o, ()))
        for name, fields in spec_fields(path).items()}
    declared = {k: v for k, v in declared.items() if v}
    for node in _module_tree(path).body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) and node.value else [])
        if [getattr(t, "id", None) for t in targets] == ["TECHNIQUE"]:
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                raise RegistryError(f"{path.name}: TECHNIQUE must be a literal dict of "
                                    "checker name -> cause ids") from None
            return {**declared, **{str(k): frozenset(map(str, v)) for k, v in value.items()}}
    return declared


def _entry(bank: Path) -> Lesson:
    try:
        data = tomllib.loads(bank.read_text(encoding="utf-8")).get("lesson")
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{bank.name}: not valid TOML ({exc})") from None
    if not isinstance(data, dict):
        raise RegistryError(f"{bank.name}: no [lesson] table (the lesson's registry entry)")
    missing = [k for k in _FIELDS if k not in data]
    wrong = [k for k, kind in _FIELDS.items() if k in data and not isinstance(data[k], kind)]
    unknown = sorted(set(data) - set(_FIELDS))
    if missing or wrong or unknown:
        raise RegistryError(f"{bank.name}: [lesson] " + "; ".join(filter(None, (
            missing and f"lacks {', '.join(missing)}",
            wrong and f"has the wrong type for {', '.join(wrong)}",
            unknown and f"has unknown keys {', '.join(unknown)}"))))
    stem = bank.stem
    if not stem.startswith(f"{data['number']:02d}_"):
        raise RegistryError(f"{bank.name}: number = {data['number']} but the file is {stem}")
    return Lesson(data["number"], stem, data["title"], data["summary"], data["you_write"],
                  tuple(data["topics"]), data["checker"], tuple(data["plots"]), data["marker"],
                  tuple(data["terms"]))


def load(banks: Path = BANKS) -> tuple[Lesson, ...]:
    """Every lesson, by number, from the question banks in ``banks``."""
    found = tuple(sorted((_entry(p) for p in sorted(banks.glob("[0-9][0-9]_*.toml"))),
                         key=lambda lesson: lesson.number))
    numbers = [lesson.number for lesson in found]
    if numbers != list(range(1, len(found) + 1)):
        raise RegistryError(f"lesson numbers must run 1, 2, ... without gaps: {numbers}")
    return found


LESSONS: tuple[Lesson, ...] = load()

BY_STEM = {lesson.stem: lesson for lesson in LESSONS}
BY_MARKER = {lesson.marker: lesson for lesson in LESSONS}
CHECKER_MODULES: tuple[str, ...] = tuple(dict.fromkeys(lesson.checker for lesson in LESSONS))

README_HEADER = "| # | lesson | you write |\n|---|---|---|"


def technique() -> dict[str, frozenset[str]]:
    """Every checker's technique causes, from the declarations of all checker modules."""
    out: dict[str, frozenset[str]] = {}
    for lesson in LESSONS:
        out.update(lesson.technique)
    return out


def readme_table() -> str:
    """The README's lessons table, header included."""
    return README_HEADER + "\n" + "\n".join(lesson.readme_row() for lesson in LESSONS)


def marker_lines() -> list[str]:
    """The ``markers`` entries of the lessons, as ``pyproject.toml`` lists them."""
    return [lesson.marker_line() for lesson in LESSONS]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["readme"]:
        print(readme_table())
    elif args == ["markers"]:
        print("\n".join(f'    "{line}",' for line in marker_lines()))
    else:
        print("usage: python -m cudacourse.course.lessons readme|markers", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
