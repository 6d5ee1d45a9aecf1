"""What is checked before a submission runs, and the private copy that is graded.

nbgrader 0.9.6 stops the whole run on a duplicated grade_id (a copy-pasted answer cell) and
silently drops a submission with invalid JSON, a non-UTF-8 byte, a notebook under another
name, a garbage ``timestamp.txt`` or a test cell turned into an answer cell; the export then
shows 0.0 exactly like a real zero. Here each of those is found first and the submission is
"not graded: <reason>" (shown apart from 0 everywhere), except duplicates, which are graded
by their first occurrence (later copies lose their nbgrader metadata in the private copy).

The submitted files are only read. The copy that nbgrader and the sandbox see is written to
a staging directory, with every locked cell (setup and test cells) restored from the master
exactly as nbgrader's OverwriteCells does.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

MAX_NOTEBOOK_BYTES = 50 << 20  # a submitted notebook larger than this is not graded
MAX_OTHER_BYTES = 20 << 20  # other files of a submission are copied up to this size


class NotGraded(Exception):
    """The submission cannot be graded; the message is the reason shown to everyone."""


@dataclass
class Staged:
    """One student's submission, checked and copied."""

    student: str
    assignment: str
    directory: Path  # staging/<student>/<assignment>/
    notebooks: dict[str, Path] = field(default_factory=dict)  # name -> staged path
    problems: list[str] = field(default_factory=list)  # graded anyway (e.g. duplicates)


def nb_meta(cell: Any) -> dict[str, Any]:
    md = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    nb = md.get("nbgrader", {}) if isinstance(md, dict) else {}
    return nb if isinstance(nb, dict) else {}


def master_notebooks(course_root: Path, source_dir: str, assignment: str) -> dict[str, Path]:
    d = course_root / source_dir / assignment
    found = {p.stem: p for p in sorted(d.glob("*.ipynb"))}
    if not found:
        raise FileNotFoundError(f"no master notebooks in {d}")
    return found


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path``, or NotGraded naming exactly what is wrong with it."""
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise NotGraded(f"{path.name} is {size >> 20} MiB, more than the "
                        f"{MAX_NOTEBOOK_BYTES >> 20} MiB allowed")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotGraded(f"{path.name} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at "
                        f"offset {exc.start}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotGraded(f"{path.name} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                        f"column {exc.colno}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotGraded(f"{path.name} is JSON but not a notebook (no list of cells)")
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # noqa: BLE001 - nbformat raises several kinds
        msg = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise NotGraded(f"{path.name} is not a valid notebook: {msg}") from None
    return nb


def check_timestamp(path: Path) -> None:
    if not path.exists():
        return
    from nbgrader.utils import parse_utc

    try:
        text = path.read_text(encoding="utf-8").strip()
    except (UnicodeDecodeError, OSError) as exc:
        raise NotGraded(f"timestamp.txt is unreadable: {exc}") from None
    if not text:
        return  # nbgrader treats an empty file as "no timestamp"
    try:
        parse_utc(text)
    except (ValueError, OverflowError, TypeError) as exc:
        raise NotGraded(f"timestamp.txt holds {text[:60]!r}, which is not a date and time "
                        f"({exc})") from None


def restore(nb: nbformat.NotebookNode, master: nbformat.NotebookNode,
            problems: list[str]) -> nbformat.NotebookNode:
    """Duplicates graded by first occurrence; locked cells restored from the master.

    Raises NotGraded when a test cell of the master was turned into an answer cell."""
    nb = copy.deepcopy(nb)
    by_id = {nb_meta(c).get("grade_id"): c for c in master.cells if nb_meta(c).get("grade_id")}
    seen: set[str] = set()
    for index, cell in enumerate(nb.cells):
        meta = nb_meta(cell)
        gid = meta.get("grade_id")
        if not gid:
            continue
        if gid in seen:
            problems.append(f"cell {index}: grade_id '{gid}' appears again (a copied cell); "
                            "graded by its first occurrence")
            cell.metadata.pop("nbgrader", None)
            continue
        seen.add(gid)
        src = by_id.get(gid)
        if src is None:
            continue
        smeta = nb_meta(src)
        if smeta.get("grade") and not smeta.get("solution") and meta.get("solution"):
            raise NotGraded(f"test cell '{gid}' was turned into an answer cell")
        if smeta.get("locked") or (smeta.get("grade") and not smeta.get("solution")):
            cell.cell_type = src.cell_type
            cell.source = src.source
            _merge_meta(cell, smeta)
            if cell.cell_type == "code":
                cell.setdefault("outputs", [])
                cell.setdefault("execution_count", None)
            else:
                cell.pop("outputs", None)
                cell.pop("execution_count", None)
        elif smeta.get("solution"):
            _merge_meta(cell, smeta)
    _find_lost_answers(nb, master, seen, problems)
    return nb


# Written into the source of an answer cell that could not be found, so that the verdict of
# every test cell using its names says why (allowlist.MISSING_MARK reads it).
MISSING_MARK = "# cudacourse: missing answer cell:"


def _defined_names(source: str) -> set[str]:
    """Top-level names a cell binds (functions, assignments, imports), by parsing only."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return set()
    out: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def _find_lost_answers(nb: nbformat.NotebookNode, master: nbformat.NotebookNode,
                       seen: set[str], problems: list[str]) -> None:
    """An answer cell whose nbgrader metadata is gone is found by what it defines (the
    names the master's answer cell binds) and graded as that cell; when no cell defines
    them, a placeholder says, in every verdict that needs it, that the cell is missing."""
    for src in master.cells:
        meta = nb_meta(src)
        gid = meta.get("grade_id")
        if src.cell_type != "code" or not meta.get("solution") or not gid or gid in seen:
            continue
        wanted = _defined_names(src.source)
        # the course's own cells (demos that happen to bind the same name) are not answers
        given = {c.source for c in master.cells if not nb_meta(c).get("solution")}
        found = None
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and not nb_meta(cell).get("grade_id") and wanted and \
                    cell.source not in given and wanted <= _defined_names(cell.source):
                found = index
                break
        if found is not None:
            _merge_meta(nb.cells[found], meta)
            seen.add(gid)
            problems.append(f"cell {found}: answer cell '{gid}' had lost its nbgrader "
                            f"metadata; found by what it defines "
                            f"({', '.join(sorted(wanted))}) and graded as '{gid}'")
            continue
        # before the first test cell that follows it in the master, as in a learner copy
        where = _master_position(nb, master, src)
        placeholder = nbformat.v4.new_code_cell(
            f"{MISSING_MARK} {gid}: {' '.join(sorted(wanted))}\n")
        _merge_meta(placeholder, meta)
        if nb.get("nbformat_minor", 5) < 5:
            placeholder.pop("id", None)
        nb.cells.insert(where, placeholder)
        seen.add(gid)
        problems.append(f"answer cell '{gid}' is missing (its metadata was removed?)")


def _master_position(nb: nbformat.NotebookNode, master: nbformat.NotebookNode,
                     answer: Any) -> int:
    after = master.cells[master.cells.index(answer) + 1:]
    for later in after:
        gid = nb_meta(later).get("grade_id")
        for index, cell in enumerate(nb.cells):
            if gid and nb_meta(cell).get("grade_id") == gid:
                return index
    return len(nb.cells)


def _merge_meta(cell: Any, master_meta: dict[str, Any]) -> None:
    """The master's grading flags (nbgrader's checksum covers them), other keys kept."""
    meta = dict(nb_meta(cell))
    for key in ("grade", "solution", "locked", "points", "grade_id", "schema_version", "task"):
        if key in master_meta:
            meta[key] = copy.deepcopy(master_meta[key])
        else:
            meta.pop(key, None)
    cell.metadata["nbgrader"] = meta


def stage(course_root: Path, assignment: str, student: str, staging: Path, *,
          submitted_dir: str = "submitted", source_dir: str = "solutions") -> Staged:
    """Check ``submitted/<student>/<assignment>/`` and write its private copy under
    ``staging``. Raises NotGraded with the reason."""
    src = course_root / submitted_dir / student / assignment
    if not src.is_dir():
        raise NotGraded(f"nothing submitted (no directory {submitted_dir}/{student}/{assignment})")
    masters = master_notebooks(course_root, source_dir, assignment)
    given = {p.stem: p for p in src.glob("*.ipynb")}
    missing = sorted(set(masters) - set(given))
    extra = sorted(set(given) - set(masters))
    if missing:
        if extra:
            raise NotGraded(f"notebook renamed: found {', '.join(e + '.ipynb' for e in extra)} "
                            f"instead of {', '.join(m + '.ipynb' for m in missing)}")
        raise NotGraded(f"missing notebook {', '.join(m + '.ipynb' for m in missing)}")
    check_timestamp(src / "timestamp.txt")
    out = Staged(student, assignment, staging / student / assignment)
    if out.directory.exists():
        shutil.rmtree(out.directory)
    out.directory.mkdir(parents=True)
    try:
        for name, master_path in masters.items():
            nb = read_notebook(given[name])
            master = nbformat.read(master_path, as_version=4)
            staged = restore(nb, master, out.problems)
            dest = out.directory / f"{name}.ipynb"
            nbformat.write(staged, dest)
            out.notebooks[name] = dest
    except NotGraded:
        shutil.rmtree(out.directory, ignore_errors=True)  # nothing half-staged is graded
        raise
    for path in src.iterdir():  # data files a learner handed in (nbgrader copies them too)
        if path.suffix == ".ipynb" or not path.is_file() or path.is_symlink():
            continue
        if path.stat().st_size <= MAX_OTHER_BYTES:
            shutil.copyfile(path, out.directory / path.name)
        else:
            out.problems.append(f"{path.name} is larger than {MAX_OTHER_BYTES >> 20} MiB; "
                                "not copied")
    for e in extra:
        out.problems.append(f"{e}.ipynb is not a notebook of this assignment; ignored")
    return out


def file_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (for the "submissions never modified" check)."""
    import hashlib

    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


__all__ = ["NotGraded", "Staged", "stage", "restore", "read_notebook", "check_timestamp",
           "master_notebooks", "file_hashes", "nb_meta"]
