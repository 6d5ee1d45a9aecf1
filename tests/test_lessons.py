"""cudacourse.course.lessons: the registry agrees with the README, pyproject's markers and the tree."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import pytest

from cudacourse.course import lessons as L

ROOT = Path(__file__).resolve().parents[1]


def test_readme_table_comes_from_the_registry():
    readme = (ROOT / "README.md").read_text()
    assert L.readme_table() in readme, (
        "README.md's lessons table differs from src/cudacourse/course/lessons.py: paste the output of "
        "`python -m cudacourse.course.lessons readme` into README.md (or fix the registry)")


def test_pyproject_markers_come_from_the_registry():
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"]["markers"]
    lesson_markers = [m for m in markers if re.match(r"lesson\d+:", m)]
    registered = L.marker_lines()
    assert lesson_markers[:len(registered)] == registered, (
        "pyproject.toml's lesson markers differ from src/cudacourse/course/lessons.py: paste the "
        "output of `python -m cudacourse.course.lessons markers` (or fix the registry)")
    # A marker ahead of its lesson is a lesson being written: allowed until its source
    # exists (then test_lesson_sources_and_registry_list_the_same_lessons asks for its entry).
    for extra in lesson_markers[len(registered):]:
        number = int(re.match(r"lesson(\d+):", extra).group(1))
        assert not list((ROOT / "lessons").glob(f"{number:02d}_*.py")), (
            f"lessons/{number:02d}_*.py exists but has no entry in src/cudacourse/course/lessons.py")


def test_lesson_sources_and_registry_list_the_same_lessons():
    sources = sorted(p.stem for p in (ROOT / "lessons").glob("[0-9][0-9]_*.py"))
    assert sources == [lesson.stem for lesson in L.LESSONS]
    assert [lesson.number for lesson in L.LESSONS] == list(range(1, len(L.LESSONS) + 1))
    assert all(lesson.stem.startswith(f"{lesson.number:02d}_") for lesson in L.LESSONS)


@pytest.mark.parametrize("lesson", L.LESSONS, ids=lambda lesson: lesson.stem)
def test_every_file_a_lesson_names_exists(lesson):
    for path in (lesson.source, lesson.master, lesson.release):
        assert (ROOT / path).exists(), path
    assert (ROOT / "src/cudacourse/quizzes" / lesson.questions).exists(), lesson.questions
    for module in lesson.topics + lesson.plots:
        importlib.import_module(L.module_of(module))
    import cudacourse.check

    for name in lesson.checkers:
        assert callable(getattr(cudacourse.check, name)), name


@pytest.mark.parametrize("lesson", L.LESSONS, ids=lambda lesson: lesson.stem)
def test_the_lesson_uses_what_the_registry_says(lesson):
    text = (ROOT / lesson.source).read_text()
    for name in lesson.checkers:
        assert f"cudacourse.check.{name}" in text, f"{lesson.source} never calls {name}"
    for module in lesson.topics + lesson.plots:
        last = module.split(".")[-1]
        if module == "simwarp":  # installed by `import cudacourse` in the simulator
            continue
        assert re.search(rf"\b{last}\b", text), f"{lesson.source} never uses {module}"
    assert f'quiz.ask("{lesson.stem}.' in text


def test_the_command_line_prints_both():
    assert L.main(["readme"]) == 0 and L.main(["markers"]) == 0
    assert L.main([]) == 2


@pytest.mark.parametrize("lesson", L.LESSONS, ids=lambda lesson: lesson.stem)
def test_technique_causes_are_declared_by_the_checkers_they_name(lesson):
    """Each ``TECHNIQUE`` entry names a checker of that module and causes its module (or the
    observation helpers under it) raises; partial credit reads exactly these."""
    from cudacourse.check import _observe
    from cudacourse.grader import partial

    text = lesson.checker_path.read_text() + Path(_observe.__file__).read_text()
    for name, causes in lesson.technique.items():
        assert name in lesson.checkers, f"{lesson.checker}.py: TECHNIQUE names {name}"
        for cause in causes:
            assert f'"{cause}"' in text, (name, cause)
        assert partial.TECHNIQUE[name] == causes


def test_checker_modules_come_from_the_registry():
    import cudacourse.check

    assert cudacourse.check._TOPICS == tuple(lesson.checker for lesson in L.LESSONS)
    public = {n for lesson in L.LESSONS for n in lesson.checkers}
    assert public == {n for n in cudacourse.check.__all__ if n.startswith("check_")}


def test_an_entry_that_is_incomplete_is_refused_by_name(tmp_path):
    (tmp_path / "01_x.toml").write_text('[lesson]\nnumber = 1\ntitle = "x"\n')
    with pytest.raises(L.RegistryError, match=r"01_x.toml: \[lesson\] lacks summary"):
        L.load(tmp_path)
    (tmp_path / "01_x.toml").write_text('[[question]]\nid = "q"\n')
    with pytest.raises(L.RegistryError, match=r"no \[lesson\] table"):
        L.load(tmp_path)
    bank = (ROOT / "src/cudacourse/quizzes" / L.LESSONS[0].questions).read_text()
    (tmp_path / "01_x.toml").unlink()
    (tmp_path / "02_y.toml").write_text(bank.replace("number = 1", "number = 2"))
    with pytest.raises(L.RegistryError, match="without gaps"):
        L.load(tmp_path)


@pytest.mark.parametrize("lesson", [lesson.stem for lesson in L.LESSONS])
def test_every_lesson_keeps_the_registry_rules(lesson):
    """The rules of `cudacourse lesson check` on the entry, its files, the setup cell, the
    README row and the marker, and the causes its checker raises."""
    from cudacourse.course import lessonrules

    problems = lessonrules.check(lesson, ROOT, ("entry", "files", "setup_cell",
                                                "registry_listed", "causes", "built"))
    assert not problems, "\n".join(map(str, problems))
