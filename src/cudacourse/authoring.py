"""Lesson sources -> instructor masters -> learner copies.

Lessons are written as reviewable percent-format Python files, ``lessons/NN_topic.py``.
They are built into the nbgrader masters ``solutions/NN_topic/NN_topic.ipynb`` (never edited
by hand: edit the ``.py`` and rebuild), which ``nbgrader generate_assignment`` turns into the
learner copies ``notebooks/NN_topic/NN_topic.ipynb``.

Cell markers::

    # %% [markdown]                          markdown; each line starts with "# "
    # %%                                     ordinary code (demo), editable
    # %% [readonly] id=setup                 locked code cell (nbgrader restores it)
    # %% [solution] id=vector_add            autograded answer (### BEGIN/END SOLUTION)
    # %% [tests] id=test_vector_add points=3 autograder tests (### BEGIN/END HIDDEN TESTS)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
_MARK = re.compile(r"^# %%(?:\s*\[(?P<kind>[\w-]+)\])?(?P<attrs>.*)$")
_KINDS = {None, "markdown", "readonly", "solution", "tests"}


class LessonSyntaxError(ValueError):
    pass


@dataclass
class Cell:
    kind: str | None
    attrs: dict[str, str]
    lines: list[str]
    lineno: int


def parse(text: str, name: str = "<lesson>") -> list[Cell]:
    cells: list[Cell] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _MARK.match(line)
        if m:
            kind = m.group("kind")
            if kind not in _KINDS:
                raise LessonSyntaxError(f"{name}:{lineno}: unknown cell kind [{kind}]")
            attrs = dict(a.split("=", 1) for a in m.group("attrs").split())
            cells.append(Cell(kind, attrs, [], lineno))
        elif cells:
            cells[-1].lines.append(line)
        elif line.strip():
            raise LessonSyntaxError(f"{name}:{lineno}: text before the first '# %%' marker")
    return cells


def _strip(lines: list[str]) -> str:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return "\n".join(lines)


def to_notebook(text: str, name: str = "<lesson>") -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                       "name": "python3"},
        "language_info": {"name": "python"},
    }
    ids: set[str] = set()
    for k, c in enumerate(parse(text, name)):
        if c.kind == "markdown":
            src = _strip([re.sub(r"^# ?", "", ln) for ln in c.lines])
            cell = nbformat.v4.new_markdown_cell(src)
        else:
            cell = nbformat.v4.new_code_cell(_strip(c.lines))
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


def lessons(root: Path = ROOT) -> list[Path]:
    return sorted((root / "lessons").glob("[0-9][0-9]_*.py"))


def master_path(lesson: Path, root: Path = ROOT) -> Path:
    return root / "solutions" / lesson.stem / f"{lesson.stem}.ipynb"


def release_path(lesson: Path, root: Path = ROOT) -> Path:
    return root / "notebooks" / lesson.stem / f"{lesson.stem}.ipynb"


def render(nb: nbformat.NotebookNode) -> str:
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def build_masters(root: Path = ROOT) -> list[Path]:
    """Write every master from its lesson source; return the ones that changed."""
    changed = []
    for lesson in lessons(root):
        out = master_path(lesson, root)
        text = render(to_notebook(lesson.read_text(), str(lesson)))
        if not out.exists() or out.read_text() != text:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
            changed.append(out)
    return changed


def generate_release(assignment: str, root: Path = ROOT) -> str:
    """Run ``nbgrader generate_assignment`` in a scratch course; return the learner copy.

    A scratch copy keeps the real gradebook untouched and makes the result reproducible.
    """
    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        shutil.copytree(root / "solutions" / assignment, course / "solutions" / assignment)
        shutil.copy(root / "nbgrader_config.py", course / "nbgrader_config.py")
        # nbgrader runs `alembic` as a subprocess: this environment's bin/ must be on PATH.
        env = {**os.environ,
               "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
        cmd = [sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force",
               f"--db=sqlite:///{course}/gradebook.db", "--log-level=ERROR"]
        proc = subprocess.run(cmd, cwd=course, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n"
                               f"{proc.stdout}\n{proc.stderr}")
        nb = nbformat.read(course / "notebooks" / assignment / f"{assignment}.ipynb", 4)
        return render(nb)


def build(root: Path = ROOT, check_only: bool = False,
          only: list[str] | None = None) -> list[str]:
    """Rebuild masters and learner copies; with ``check_only``, report what is stale.

    ``only`` limits the work to lessons whose name starts with one of its strings.
    """
    stale: list[str] = []
    for lesson in lessons(root):
        if only and not any(lesson.stem.startswith(o) for o in only):
            continue
        master = master_path(lesson, root)
        want_master = render(to_notebook(lesson.read_text(), str(lesson)))
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
    return stale
