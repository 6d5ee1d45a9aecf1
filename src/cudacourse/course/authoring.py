"""Lesson sources -> instructor masters -> learner copies.

Lessons are written as reviewable percent-format Python files, ``lessons/NN_topic.py``, read
with jupytext (the ecosystem's tool for text notebooks, which also lets an author open the
source as a notebook in JupyterLab and save it back: docs/authoring.md, "Pairing"). They
are built into the nbgrader masters ``solutions/NN_topic/NN_topic.ipynb`` (never edited by
hand: edit the ``.py`` and rebuild), which ``nbgrader generate_assignment`` turns into the
learner copies ``notebooks/NN_topic/NN_topic.ipynb``.

Cell markers (jupytext keeps them as the cell's title and metadata)::

    # %% [markdown]                          markdown; each line starts with "# "
    # %%                                     ordinary code (demo), editable
    # %% [readonly] id=setup                 locked code cell (nbgrader restores it)
    # %% [solution] id=vector_add            autograded answer (### BEGIN/END SOLUTION)
    # %% [tests] id=test_vector_add points=3 autograder tests (### BEGIN/END HIDDEN TESTS)

The course root (the folder holding ``lessons/``, ``nbgrader_config.py``) is found from the
current directory upwards, or given as ``root``: nothing here depends on where the package
is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import nbformat

from .lessonsource import (Cell, LessonSyntaxError, _attrs, _strip,  # noqa: F401 - as before
                           parse)

from . import quiz


from .courseroot import CourseRootNotFound, find_root  # noqa: E402,F401 - as before


def __getattr__(name: str) -> Any:
    """``ROOT``: the course root found from the current directory (that directory itself
    when there is none, so that importing never fails)."""
    if name == "ROOT":
        try:
            return find_root()
        except CourseRootNotFound:
            return Path.cwd()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def to_notebook(text: str, name: str = "<lesson>",
                root: str | Path | None = None) -> nbformat.NotebookNode:
    """The master notebook of a lesson source; markdown placeholders (``{{bench.copy.gb_s}}``)
    are filled from the course's figures (``cudacourse.course.prose``, under ``root``)."""
    from . import prose

    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                       "name": "python3"},
        "language_info": {"name": "python"},
    }
    ids: set[str] = set()
    for k, c in enumerate(parse(text, name)):
        if c.kind == "markdown":
            try:
                filled = prose.fill(c.source, root=root)
            except prose.MissingFigure as exc:
                raise LessonSyntaxError(f"{name}:{c.lineno}: {exc}") from exc
            cell = nbformat.v4.new_markdown_cell(filled)
        else:
            cell = nbformat.v4.new_code_cell(c.source)
        gid = c.attrs.get("id")
        if c.kind in ("readonly", "solution", "tests") and not gid:
            raise LessonSyntaxError(f"{name}:{c.lineno}: [{c.kind}] cells need id=...")
        if gid:
            if gid in ids:
                raise LessonSyntaxError(f"{name}:{c.lineno}: duplicate id {gid}")
            ids.add(gid)
        cell.id = gid or f"cell-{k:03d}"
        if c.kind == "readonly":
            cell.metadata["nbgrader"] = {"grade": False, "solution": False, "locked": True,
                                         "grade_id": gid, "schema_version": 3}
        elif c.kind == "solution":
            if "### BEGIN SOLUTION" not in cell.source:
                raise LessonSyntaxError(f"{name}:{c.lineno}: [solution] without ### BEGIN SOLUTION")
            cell.metadata["nbgrader"] = {"grade": False, "solution": True, "locked": False,
                                         "grade_id": gid, "schema_version": 3}
        elif c.kind == "tests":
            points = float(c.attrs.get("points", "1"))
            cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True,
                                         "points": points, "grade_id": gid,
                                         "schema_version": 3}
        nb.cells.append(cell)
    return nb


def lessons(root: str | Path | None = None) -> list[Path]:
    """The sources of the registry's lessons (:mod:`cudacourse.course.lessons`) in this course, by
    number; a source there without a registry entry is an error naming what it lacks."""
    from . import lessons as registry

    folder = find_root(root) / "lessons"
    unregistered = sorted(p.name for p in folder.glob("[0-9][0-9]_*.py")
                          if p.stem not in registry.BY_STEM)
    if unregistered:
        raise registry.RegistryError(
            f"{', '.join(unregistered)}: no registry entry (a [lesson] table in "
            f"cudacourse/quizzes/<stem>.toml, see docs/authoring.md)")
    return [folder / f"{lesson.stem}.py" for lesson in registry.LESSONS
            if (folder / f"{lesson.stem}.py").exists()]


def master_path(lesson: Path, root: str | Path | None = None, lang: str = "en") -> Path:
    """The master; another language's edition sits in ``solutions/<lang>/``."""
    edition = () if lang == "en" else (lang,)
    return find_root(root).joinpath("solutions", *edition, lesson.stem, f"{lesson.stem}.ipynb")


def release_path(lesson: Path, root: str | Path | None = None, lang: str = "en") -> Path:
    edition = () if lang == "en" else (lang,)
    return find_root(root).joinpath("notebooks", *edition, lesson.stem, f"{lesson.stem}.ipynb")


EDITIONS = ("ja",)  # languages besides English with a translation file per lesson


def editions(lesson: Path, root: str | Path | None = None) -> list[str]:
    """The languages ``lesson`` has a translation file for (cudacourse.i18n.translations)."""
    from ..i18n import translations

    root = find_root(root)
    return [lang for lang in EDITIONS
            if translations.po_path(lesson.stem, lang, root).is_file()]


def edition_notebook(lesson: Path, lang: str, root: str | Path | None = None
                     ) -> nbformat.NotebookNode:
    """The ``lang`` master of ``lesson``: the English master's cells, markdown translated."""
    from ..i18n import translations

    root = find_root(root)
    text = lesson.read_text()
    nb = master_notebook(lesson, root)
    catalog = translations.read(translations.po_path(lesson.stem, lang, root))
    return translations.translated_notebook(nb, text, catalog, lang, str(lesson), root,
                                            answer_comment=quiz.answer_comment)


def master_notebook(lesson: Path, root: str | Path | None = None) -> nbformat.NotebookNode:
    """The instructor's master of ``lesson``: its cells, with the questions' key tokens
    written in (instructor-side only; issue 19, class 3). ``build`` writes exactly this."""
    root = find_root(root)
    return quiz.embed_keys(to_notebook(lesson.read_text(), str(lesson), root), root)


def render(nb: nbformat.NotebookNode) -> str:
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def render_release(nb: nbformat.NotebookNode) -> str:
    """A learner copy exactly as ``nbgrader generate_assignment`` writes it (nbformat.write:
    sources split into lines, one trailing newline), so releasing the course with nbgrader
    leaves the tracked copies byte for byte as they are (a clean tree, clean provenance)."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def generate_release(assignment: str, root: str | Path | None = None, lang: str = "en") -> str:
    """Run ``nbgrader generate_assignment`` in a scratch course; return the learner copy.

    A scratch copy keeps the real gradebook untouched and makes the result reproducible.
    Another language's master is generated under the same assignment name (the same
    grade ids, points and quiz mode: scores do not depend on the language).
    """
    root = find_root(root)
    masters = root / "solutions" / (lang if lang != "en" else "") / assignment
    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        shutil.copytree(masters, course / "solutions" / assignment)
        shutil.copy(root / "nbgrader_config.py", course / "nbgrader_config.py")
        # nbgrader runs `alembic` as a subprocess: this environment's bin/ must be on PATH.
        env = {**os.environ,
               "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
        env.pop("CUDACOURSE_LANG", None)  # the scratch course's folders are the plain ones
        cmd = [sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force",
               f"--db=sqlite:///{course}/gradebook.db", "--log-level=ERROR"]
        proc = subprocess.run(cmd, cwd=course, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n"
                               f"{proc.stdout}\n{proc.stderr}")
        nb = nbformat.read(course / "notebooks" / assignment / f"{assignment}.ipynb", 4)
        return render_release(nb)


def build(root: str | Path | None = None, check_only: bool = False,
          only: list[str] | None = None) -> list[str]:
    """Rebuild masters and learner copies; with ``check_only``, report what is stale.

    ``only`` limits the work to lessons whose name starts with one of its strings.
    """
    root = find_root(root)
    stale: list[str] = []
    for lesson in lessons(root):
        if only and not any(lesson.stem.startswith(o) for o in only):
            continue
        master = master_path(lesson, root)
        want_master = render(master_notebook(lesson, root))
        if not master.exists() or master.read_text() != want_master:
            stale.append(str(master.relative_to(root)))
            if check_only:
                continue
            master.parent.mkdir(parents=True, exist_ok=True)
            master.write_text(want_master)
        text = generate_release(lesson.stem, root)
        release = release_path(lesson, root)
        if not release.exists() or release.read_text() != text:
            stale.append(str(release.relative_to(root)))
            if not check_only:
                release.parent.mkdir(parents=True, exist_ok=True)
                release.write_text(text)
        for lang in editions(lesson, root):
            stale += _build_edition(lesson, lang, root, check_only)
    return stale


def _build_edition(lesson: Path, lang: str, root: Path, check_only: bool) -> list[str]:
    """The ``lang`` master and learner copy of ``lesson`` (see :func:`build`)."""
    stale = []
    master = master_path(lesson, root, lang)
    want = render(edition_notebook(lesson, lang, root))
    if not master.exists() or master.read_text() != want:
        stale.append(str(master.relative_to(root)))
        if check_only:
            return stale
        master.parent.mkdir(parents=True, exist_ok=True)
        master.write_text(want)
    text = generate_release(lesson.stem, root, lang)
    release = release_path(lesson, root, lang)
    if not release.exists() or release.read_text() != text:
        stale.append(str(release.relative_to(root)))
        if not check_only:
            release.parent.mkdir(parents=True, exist_ok=True)
            release.write_text(text)
    return stale
