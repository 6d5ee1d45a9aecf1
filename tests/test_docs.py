"""docs/architecture.md and docs/authoring.md held to the code: they cannot drift.

Every file they name exists (a template, ``lessons/NN_topic.py`` or ``check/<topic>.py``,
matches at least one file), every ``cudacourse.*`` module they name exists and so does the
attribute they name in it, and the steps they list are the code's: the grading stages in
``runner.STAGES``' order, the registry fields of ``cudacourse.course.lessons``, the setup cell's first
lines as the lessons write them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from cudacourse.course import lessons
from cudacourse.course.authoring import ROOT

PACKAGE = ROOT / "src" / "cudacourse"
DOCS = ["docs/architecture.md", "docs/authoring.md"]
PATH = re.compile(r"(?<![\w/.<-])((?:[\w.<>-]+/)*[\w.<>-]+\.(?:py|md|json|toml|po|ipynb|sh))\b")
MODULE = re.compile(r"`(cudacourse(?:\.\w+)+)")
# Names of files a reader makes or a process writes, not files of the checkout.
NOT_FILES = {"docs/test_docs.py"}


def _text(doc: str) -> str:
    return (ROOT / doc).read_text(encoding="utf-8")


def _pattern(name: str) -> str:
    """A template's glob: NN_topic -> 07_x, NN -> 07, <topic> -> anything."""
    name = re.sub(r"<[^>]+>", "*", name)
    return name.replace("NN_topic", "[0-9][0-9]_*").replace("NN", "[0-9][0-9]*")


def _found(name: str) -> bool:
    pattern = _pattern(name)
    for base in (ROOT, PACKAGE, ROOT / "docs"):
        if any(base.glob(pattern)):
            return True
    # a bare module file named in a diagram beside its folder ("_replay.py + _source.py")
    return "/" not in name and any(PACKAGE.rglob(pattern))


@pytest.mark.parametrize("doc", DOCS)
def test_every_file_a_doc_names_exists(doc):
    missing = sorted(n for n in set(PATH.findall(_text(doc))) if not _found(n))
    assert not missing, f"{doc} names files that do not exist: {missing}"


def _module_file(dotted: str) -> Path | None:
    rel = Path(*dotted.split("."))
    for path in (ROOT / "src" / rel.with_suffix(".py"), ROOT / "src" / rel / "__init__.py"):
        if path.exists():
            return path
    return None


def _defines(path: Path, name: str) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name
                                                    for a in node.names):
            return True
    return False


@pytest.mark.parametrize("doc", DOCS)
def test_every_module_a_doc_names_exists_with_what_it_names_in_it(doc):
    wrong = []
    for dotted in sorted(set(MODULE.findall(_text(doc)))):
        parts = dotted.split(".")
        if parts[-1] in ("mo", "po", "py", "toml") or re.fullmatch(r"check_x?", parts[-1]):
            continue  # a file (cudacourse.mo), or a template (check_x, check_<exercise>)
        for cut in range(len(parts), 0, -1):  # the longest prefix that is a module
            path = _module_file(".".join(parts[:cut]))
            if path is not None:
                break
        rest = parts[cut:]
        if path is None or len(rest) > 1 or (rest and not _defines(path, rest[0])):
            wrong.append(dotted)
    assert not wrong, f"{doc} names modules or attributes that do not exist: {wrong}"


def test_the_grading_stages_are_listed_in_the_order_of_runner_stages():
    from cudacourse.grader import runner

    text = re.sub(r"\s+", " ", _text("docs/architecture.md"))
    listed = re.search(r"\(`runner\.STAGES`\): ([^.]+)\.", text)
    assert listed, "architecture.md no longer lists the stages after (`runner.STAGES`):"
    assert [s.strip() for s in listed.group(1).split(",")] == [n for n, _ in runner.STAGES]


def test_the_registry_fields_authoring_shows_are_the_registrys():
    text = ast.get_docstring(ast.parse(_text("src/cudacourse/course/lessons.py")))  # its example
    shown = re.findall(r"^    (\w+) = ", text, flags=re.M)
    assert sorted(shown) == sorted(lessons._FIELDS)
    doc = re.sub(r"\s+", " ", _text("docs/architecture.md"))
    named = re.search(r"question bank \(`[^`]+`: ([^)]+)\)", doc).group(1)
    for field in ("number", "title", "topics", "plots", "marker", "terms"):
        assert field in named, field


def test_the_setup_cell_authoring_describes_is_the_lessons():
    doc = re.sub(r"\s+", " ", _text("docs/authoring.md"))
    first = re.search(r"whose first lines are `([^`]+)` and `([^`]+)`", doc)
    assert first, "authoring.md no longer says what the setup cell starts with"
    for lesson in lessons.LESSONS:
        source = (ROOT / lesson.source).read_text(encoding="utf-8")
        setup = source.split("# %% [readonly] id=setup\n", 1)[1].splitlines()
        assert [line.split("#")[0].strip() for line in setup[:2]] == list(first.groups())


def test_the_rules_authoring_lists_are_the_validators():
    """docs/authoring.md's *Rules a lesson keeps* is `python -m cudacourse.course.lessonrules doc`,
    the rules `cudacourse lesson check` reports: regenerate the block when this fails."""
    from cudacourse.course import lessonrules

    text = _text("docs/authoring.md")
    start = text.index(lessonrules.DOC_BEGIN)
    end = text.index(lessonrules.DOC_END) + len(lessonrules.DOC_END)
    assert text[start:end] == lessonrules.doc(), \
        "run: python -m cudacourse.course.lessonrules doc --write docs/authoring.md"
    section = text[text.index("## Rules a lesson keeps"):]
    assert section.index(lessonrules.DOC_BEGIN) < section.index("\n## ", 1)
