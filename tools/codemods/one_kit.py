"""Codemod: one check kit, one way to fail (issue 44).

Rewrites, in ``src/cudacourse/check/*.py``, ``tests/*.py`` and ``tools/**/*.py``:

* every message-first ``fail(message, cause=..., ...)`` (``fail``, ``K.fail``, ``E.fail``,
  ``kit.fail``, ``_engine.fail``, ``_failure.fail``) into the one signature
  ``fail(cause, message, context=None, hint="", **more)``: ``fail(T("..."), cause="stub")``
  becomes ``fail("stub", T("..."))``; a call without ``cause=`` gets ``"wrong_values"`` (the
  old default). ``O.fail(cause, message, ...)`` already has that order and is left alone;
* ``K.launch_observed(obs, kernel, grid, block, *args, ...)`` into the one launch,
  ``K.launch(kernel, grid, block, *args, ..., obs=obs)``;
* in the lessons' checker modules, ``O.compare(...)`` and ``E.compare(...)`` into the kit's
  ``K.compare(...)`` (one compare: ``_observe.compare``, which carries the evidence of the
  last observed launch into the diagnosis; the engine's bare ``E.compare`` does not);
* in the lessons' checker modules: ``from . import _diagnose as D`` into the kit's
  ``K.diagnose`` (``D.x`` -> ``K.diagnose.x``) and ``from .tiling import poisoned_shared``
  into ``K.poisoned_shared`` (both are the kit's now).

Usage:

    python tools/codemods/one_kit.py            # rewrite in place
    python tools/codemods/one_kit.py --check    # exit 1 naming the files it would change
    python tools/codemods/one_kit.py FILE...    # these files only

Re-runnable and idempotent: a call already in the new form (two positional arguments and no
``cause=`` keyword) is left as it is, so the lead runs it again after merging branches that
added message-first calls. Arguments keep their own source text (only their order changes).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "src" / "cudacourse" / "check"
FAIL_OWNERS = {"K", "E", "kit", "_engine", "_failure", "F"}
MACHINERY = {"_failure.py"}  # defines fail itself


def _segment(src: str, lines: list[int], node: ast.AST) -> str:
    start = lines[node.lineno - 1] + node.col_offset
    end = lines[node.end_lineno - 1] + node.end_col_offset
    return src[start:end]


def _offsets(src: str) -> list[int]:
    out, pos = [], 0
    for line in src.splitlines(keepends=True):
        out.append(pos)
        pos += len(line)
    out.append(pos)
    return out


def _is_fail(func: ast.AST, bare: bool) -> bool:
    if isinstance(func, ast.Name):
        return bare and func.id == "fail"
    return (isinstance(func, ast.Attribute) and func.attr == "fail"
            and isinstance(func.value, ast.Name) and func.value.id in FAIL_OWNERS)


def _kw_text(src: str, lines: list[int], kw: ast.keyword) -> str:
    value = _segment(src, lines, kw.value)
    return f"**{value}" if kw.arg is None else f"{kw.arg}={value}"


def rewrite(src: str, *, bare: bool = True, checker: bool = False) -> str:
    """``src`` with every call above in its new form (``bare``: a plain ``fail(...)`` is the
    kit's; off in tests, where ``fail`` may be pytest's)."""
    tree = ast.parse(src)
    lines = _offsets(src)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        start = lines[node.lineno - 1] + node.col_offset
        end = lines[node.end_lineno - 1] + node.end_col_offset
        head = _segment(src, lines, func)
        if _is_fail(func, bare):
            cause = next((k for k in node.keywords if k.arg == "cause"), None)
            if cause is None and len(node.args) != 1:
                continue  # the new form already (or nothing to move)
            if any(isinstance(a, ast.Starred) for a in node.args):
                continue
            args = [_segment(src, lines, cause.value) if cause else '"wrong_values"']
            args += [_segment(src, lines, a) for a in node.args]
            args += [_kw_text(src, lines, k) for k in node.keywords if k is not cause]
            edits.append((start, end, f"{head}({', '.join(args)})"))
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id in ("K", "kit") and func.attr == "launch_observed" and node.args:
            obs = _segment(src, lines, node.args[0])
            args = [_segment(src, lines, a) for a in node.args[1:]]
            args += [_kw_text(src, lines, k) for k in node.keywords] + [f"obs={obs}"]
            edits.append((start, end, f"{func.value.id}.launch({', '.join(args)})"))
        elif checker and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id in ("O", "E") and func.attr == "compare":
            edits.append((lines[func.lineno - 1] + func.col_offset,
                          lines[func.end_lineno - 1] + func.end_col_offset, "K.compare"))
    for start, end, text in sorted(edits, reverse=True):
        nested = [e for e in edits if e[0] > start and e[1] <= end]
        if nested:  # a call inside another's arguments: the next run rewrites the outer one
            continue
        src = src[:start] + text + src[end:]
    if checker:
        src = re.sub(r"^from \. import _diagnose as D\n", "", src, flags=re.M)
        src = re.sub(r"\bD\.(\w+)", r"K.diagnose.\1", src)
        src = re.sub(r"^from \.tiling import poisoned_shared\n", "", src, flags=re.M)
        if "poisoned_shared" in src and "def poisoned_shared" not in src:
            src = re.sub(r"(?<![\w.])poisoned_shared\(", "K.poisoned_shared(", src)
    return src


def _run_until_stable(src: str, **kw: bool) -> str:
    for _ in range(8):  # nested calls: one level per pass
        new = rewrite(src, **kw)
        if new == src:
            return new
        src = new
    return src


def targets() -> list[Path]:
    files = sorted(CHECK.glob("*.py")) + sorted((ROOT / "tests").glob("*.py"))
    files += sorted(p for p in (ROOT / "tools").rglob("*.py") if "codemods" not in p.parts)
    return [p for p in files if p.name not in MACHINERY]


def _checker_modules() -> set[str]:
    sys.path.insert(0, str(ROOT / "src"))
    from cudacourse.course import lessons  # reads files only

    return {f"{name}.py" for name in lessons.CHECKER_MODULES}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    files = [Path(a).resolve() for a in argv if a != "--check"] or targets()
    checkers = _checker_modules()
    changed = []
    for path in files:
        src = path.read_text(encoding="utf-8")
        in_check = path.parent == CHECK
        new = _run_until_stable(src, bare=in_check,
                                checker=in_check and path.name in checkers)
        if new != src:
            changed.append(path)
            if not check:
                path.write_text(new, encoding="utf-8")
    for path in changed:
        print(("would rewrite " if check else "rewrote ") + str(path.relative_to(ROOT)))
    return 1 if check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
