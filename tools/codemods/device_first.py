"""Codemod: every module that needs ``numba.cuda`` imports ``cudacourse._device_first`` first.

``import cudacourse`` chooses nothing; the device is chosen by ``cudacourse.setup()`` or, where
nobody called it, by the first module of the package that needs ``numba.cuda``. This inserts
that module's import as the first import of each such module (after ``from __future__``):

    python tools/codemods/device_first.py          # rewrite the files
    python tools/codemods/device_first.py --check  # exit 1 naming the files it would change

Re-runnable and idempotent: a file that has the line is left alone. "Needs numba.cuda": it
imports ``numba`` at its top level, or it is one of the floors listed in ``FLOORS`` whose
functions import it (the launcher contract, timing, the checkers' package).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "cudacourse"
FLOORS = ("arrays.py", "launch.py", "timing.py", "occupancy.py", "intrinsics.py",
          "check/__init__.py")
MARK = "_device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads"
FUTURE = "from __future__ import annotations\n"
# tools/codemods/relayout.py's layers: their modules are scanned as the top level's were
LAYERS = ("kernels", "runtime", "course")


def _as_top(rel: str) -> str:
    """``runtime/arrays.py`` -> ``arrays.py`` (a layer's module counts as a top-level one)."""
    parts = rel.split("/")
    return parts[1] if len(parts) == 2 and parts[0] in LAYERS else rel


def _import_time(body: list) -> list:
    """The statements run when the module is imported: its body, and the bodies of its
    module-level ``if``/``else``/``try``/``with`` blocks (e.g. ``if SIM: ... else: from
    numba.cuda import ...``), never a function's."""
    out = []
    for node in body:
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list) and not isinstance(node, ast.ClassDef):
                out.extend(_import_time(inner))
    return out


def needs_numba(path: Path) -> bool:
    rel = _as_top(path.relative_to(PACKAGE).as_posix())
    if rel in FLOORS:
        return True
    if "/" in rel:  # subpackages: their __init__ (check/) or the topic modules they import
        return False
    for node in _import_time(ast.parse(path.read_text(encoding="utf-8")).body):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                 else [])
        if any(n == "numba" or n.startswith("numba.") for n in names):
            return True
    return False


def rewrite(text: str, rel: str) -> str:
    if MARK in text:
        return text
    dots = "." * (rel.count("/") + 1)
    line = f"from {dots} import {MARK}\n"
    if FUTURE not in text:
        raise SystemExit(f"{rel}: no `{FUTURE.strip()}` to put the device line after")
    head, tail = text.split(FUTURE, 1)
    return head + FUTURE + "\n" + line + ("" if tail.startswith("\n") else "\n") + tail


def main(argv: list[str]) -> int:
    check = "--check" in argv
    changed = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if path.name == "_device_first.py" or _as_top(rel) in ("device.py", "_numba_private.py"):
            continue
        if not needs_numba(path):
            continue
        text = path.read_text(encoding="utf-8")
        new = rewrite(text, rel)
        if new != text:
            changed.append(rel)
            if not check:
                path.write_text(new, encoding="utf-8")
    for rel in changed:
        print(("would change " if check else "changed ") + rel)
    return 1 if check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
