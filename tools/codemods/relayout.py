"""Codemod: a layout that shows the architecture (issue 44).

Moves the package's top-level modules into layers, beside the checkers and the grader:

    cudacourse/kernels/   the lessons' kernels: each topic module (reference, kernels, launcher)
    cudacourse/runtime/   what runs them on either device: device, launch, arrays, timing,
                          intrinsics, simwarp, simblock, hardware, occupancy
    cudacourse/course/    the course machinery: lessons, lessonsource, lessonrules, scaffold,
                          quiz, prose, authoring, workspace, courseroot, gpu_run
    cudacourse/check/     the checkers (unchanged)
    cudacourse/grader/    the grader (unchanged)

and rewrites every reference to a moved module: imports (absolute and relative, split where
one ``from cudacourse import a, b`` names modules of two layers), dotted names in code and
strings (``"cudacourse.vector"``, ``monkeypatch.setattr("cudacourse.device.x", ...)``) and
paths (``src/cudacourse/vector.py``, ``src/cudacourse/<topic>.py``) in ``src/``, ``tests/``,
``lessons/``, ``tools/``, ``docs/``, the README and the configuration files.

What stays at the top: ``__init__`` (``cudacourse.setup``), ``cli`` (the ``cudacourse``
command), ``_device_first`` and ``_numba_private`` (import-order and private-API shims every
layer uses), and the packages ``check``, ``grader``, ``bench``, ``viz``, ``i18n``,
``locale``, ``quizzes``.

Learner notebooks already copied into workspaces (never overwritten) import the lessons'
modules by their old names (``from cudacourse import device, vector``, ``cudacourse.launch``):
``cudacourse/__init__.py`` gets a module ``__getattr__`` that serves exactly the names the
lesson sources use (:data:`LEARNER_NAMES`), so those notebooks keep working; no other old
name is kept.

Usage (from the checkout's root; the tree is the repository's):

    python tools/codemods/relayout.py            # move and rewrite
    python tools/codemods/relayout.py --check    # exit 1 when anything is left to do
    python tools/codemods/relayout.py --root DIR # another checkout (a scratch copy)

Re-runnable: a module already moved is not moved again, a reference already rewritten does
not match again; after merging branches that still use old names, run it again. Then
``./course build`` (the masters' setup cells changed) and commit.
"""

from __future__ import annotations

import ast
import re
import shutil
import sys
import tomllib
from pathlib import Path

LAYERS: dict[str, tuple[str, ...]] = {
    "kernels": ("vector", "cpu_vs_gpu", "indexing", "warps", "transfer", "launch_cost",
                "matmul", "reduce", "transpose", "softmax", "attention", "stencil", "lbm",
                "matmul_mma", "attention_mma"),
    "runtime": ("device", "launch", "arrays", "timing", "intrinsics", "simwarp", "simblock",
                "hardware", "occupancy", "asm", "tensorcore", "fragments"),
    "course": ("lessons", "lessonsource", "lessonrules", "scaffold", "quiz", "prose",
               "authoring", "workspace", "courseroot", "gpu_run"),
}
DOCSTRINGS = {
    "kernels": "The lessons' kernels: per topic, the NumPy reference, the kernels and their "
               "launcher.",
    "runtime": "What runs the kernels on either device: the device choice, launches, arrays, "
               "timing, intrinsics, the simulator's warp and block extensions, hardware "
               "figures.",
    "course": "The course machinery: the lesson registry and its rules, lesson sources, "
              "quizzes, prose, the build, the learner's workspace.",
}
MOVED = {mod: layer for layer, mods in LAYERS.items() for mod in mods}
# What learner notebooks (lessons/*.py setup cells and code) name as cudacourse.<module>:
# served by cudacourse.__getattr__ after the move, for notebooks already in workspaces.
LEARNER_NAMES = ("asm", "attention", "cpu_vs_gpu", "device", "indexing", "launch",
                 "launch_cost", "lbm", "matmul", "occupancy", "prose", "quiz", "reduce",
                 "simwarp", "softmax", "stencil", "transfer", "transpose", "vector", "warps")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".cfg", ".ini", ".txt", ".yml", ".yaml"}
# records of past runs (docs/*.json) keep the names they were made with
SKIP_DIRS = {".git", ".venv", "__pycache__", "node_modules", ".pytest_cache", "solutions",
             "notebooks", "sweeps", "figures"}
SKIP_MARK = "relayout: this file names the old layout on purpose"
COMPAT_MARK = "# --- old names, for learner notebooks already in workspaces (relayout) ---"


# --- moving --------------------------------------------------------------------------------

def move(pkg: Path) -> list[tuple[Path, Path]]:
    """Move each module of :data:`LAYERS` not yet in its layer; returns (old, new) paths."""
    moves = []
    for layer, mods in LAYERS.items():
        folder = pkg / layer
        init = folder / "__init__.py"
        if not init.exists():
            folder.mkdir(exist_ok=True)
            init.write_text(f'"""{DOCSTRINGS[layer]}"""\n', encoding="utf-8")
        for mod in mods:
            old, new = pkg / f"{mod}.py", folder / f"{mod}.py"
            if old.exists() and not new.exists():
                shutil.move(str(old), str(new))
                moves.append((old, new))
    return moves


# --- module names ---------------------------------------------------------------------------

def new_name(dotted: str) -> str:
    """``cudacourse.vector.x`` -> ``cudacourse.kernels.vector.x``; anything else as it is."""
    parts = dotted.split(".")
    if len(parts) >= 2 and parts[0] == "cudacourse" and parts[1] in MOVED:
        return ".".join(["cudacourse", MOVED[parts[1]], *parts[1:]])
    return dotted


def _module_name(pkg: Path, path: Path) -> str:
    rel = path.relative_to(pkg.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def _absolute(node: ast.ImportFrom, package: str) -> str:
    base = package.split(".")
    if node.level > 1:
        base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _relative(target: str, package: str) -> tuple[int, str]:
    """(level, module) of ``from <dots><module> import`` reaching ``target`` from
    ``package``."""
    t, p = target.split("."), package.split(".")
    common = 0
    while common < min(len(t), len(p)) and t[common] == p[common]:
        common += 1
    level = len(p) - common + 1
    return level, ".".join(t[common:])


def _offsets(src: str) -> list[int]:
    out, pos = [0], 0
    for line in src.splitlines(keepends=True):
        pos += len(line)
        out.append(pos)
    return out


def _alias(a: ast.alias) -> str:
    return a.name + (f" as {a.asname}" if a.asname else "")


def rewrite_imports(src: str) -> str:
    """``src`` with its absolute import statements naming moved modules rewritten."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    lines = _offsets(src)
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        start = lines[node.lineno - 1] + node.col_offset
        end = lines[node.end_lineno - 1] + node.end_col_offset
        indent = " " * node.col_offset
        if isinstance(node, ast.Import):
            names = [ast.alias(new_name(a.name), a.asname) for a in node.names]
            if [a.name for a in names] != [a.name for a in node.names]:
                edits.append((start, end, "import " + ", ".join(map(_alias, names))))
            continue
        if node.level:
            continue  # relative: _rewrite_relative's
        base = node.module or ""
        if not base.startswith("cudacourse"):
            continue
        # each imported name: a submodule (moved or not) or an attribute of base's module
        groups: dict[str, list[ast.alias]] = {}
        for a in node.names:
            full = new_name(f"{base}.{a.name}")
            if full != f"{base}.{a.name}" and base == "cudacourse":
                target = full.rsplit(".", 1)[0]  # cudacourse.<layer>
            else:
                target = new_name(base)
            groups.setdefault(target, []).append(a)
        stmts = [f"from {target} import {', '.join(map(_alias, aliases))}"
                 for target, aliases in groups.items()]
        if not (len(groups) == 1 and next(iter(groups)) == base):
            edits.append((start, end, ("\n" + indent).join(_wrap(s, indent) for s in stmts)))
    for start, end, text in sorted(edits, reverse=True):
        src = src[:start] + text + src[end:]
    return src


def _wrap(stmt: str, indent: str, width: int = 99) -> str:
    if len(indent) + len(stmt) <= width:
        return stmt
    head, names = stmt.split(" import ", 1)
    out, line = [], f"{head} import ("
    for name in names.split(", "):
        piece = name + ", "
        if len(indent) + len(line) + len(piece) > width and line.strip() != f"{head} import (":
            out.append(line.rstrip())
            line = indent + "    "
        line += piece
    out.append(line.rstrip().rstrip(",") + ")")
    return "\n".join(out)


# --- dotted names and paths in any text ----------------------------------------------------

def _patterns() -> tuple[re.Pattern, re.Pattern]:
    names = "|".join(sorted(MOVED, key=len, reverse=True))
    return (re.compile(r"(?<![\w.])cudacourse\.(" + names + r")\b(?!\.py)"),
            re.compile(r"(?<![\w])cudacourse/(" + names + r")\.py\b"))


_DOTTED, _PATH = _patterns()


def add_registry_topics(pkg: Path) -> list[str]:
    """A lesson's topic module still at the top (a lesson added since this list was written,
    e.g. by ``cudacourse lesson new``) goes to ``kernels/`` too; returns those names."""
    global _DOTTED, _PATH
    extra = []
    for bank in sorted((pkg / "quizzes").glob("[0-9][0-9]_*.toml")):
        topics = tomllib.loads(bank.read_text(encoding="utf-8")).get("lesson", {}).get(
            "topics", [])
        for t in topics:
            if "." not in t and t not in MOVED and ((pkg / f"{t}.py").exists()
                                                    or (pkg / "kernels" / f"{t}.py").exists()):
                MOVED[t] = "kernels"
                extra.append(t)
    if extra:
        LAYERS["kernels"] = LAYERS["kernels"] + tuple(extra)
        _DOTTED, _PATH = _patterns()
    return extra


def rewrite_text(text: str) -> str:
    """Dotted names ``cudacourse.<moved>`` and paths ``cudacourse/<moved>.py`` and the
    template ``src/cudacourse/<topic>.py`` in their layers."""
    text = _DOTTED.sub(lambda m: f"cudacourse.{MOVED[m.group(1)]}.{m.group(1)}", text)
    text = _PATH.sub(lambda m: f"cudacourse/{MOVED[m.group(1)]}/{m.group(1)}.py", text)
    return text.replace("src/cudacourse/<topic>.py", "src/cudacourse/kernels/<topic>.py")


# --- the compatibility names for learner notebooks -------------------------------------------

def compat_block(own_getattr: bool) -> str:
    """The old names' lookup; ``own_getattr``: the package already has a ``__getattr__``
    (``MODE``), which answers every other name."""
    names = ", ".join(f'"{n}": "{MOVED[n]}"' for n in LEARNER_NAMES)
    keep = ("_own_getattr = __getattr__  # the package's own lookup, for every other name\n"
            if own_getattr else
            "\n\ndef _own_getattr(name: str) -> Any:\n    raise AttributeError("
            "f\"module 'cudacourse' has no attribute {name!r}\")\n")
    return f'''

{COMPAT_MARK}
# Learner notebooks already copied into workspaces (learner work is never overwritten) say
# `from cudacourse import device, vector`, or reach a module as an attribute of `cudacourse`:
# those names, and only those, still resolve (to the module in its layer).
_LEARNER_NAMES = types.MappingProxyType({{{names}}})
{keep}

def __getattr__(name: str) -> Any:  # noqa: F811 - the old names first, then the package's own
    layer = _LEARNER_NAMES.get(name)
    if layer is None:
        return _own_getattr(name)
    return importlib.import_module(f"cudacourse.{{layer}}.{{name}}")
'''


def add_compat(init: Path) -> bool:
    text = init.read_text(encoding="utf-8")
    if COMPAT_MARK in text:
        return False
    for need in ("import importlib", "import types"):
        if not re.search(rf"^{need}$", text, re.M):
            text = re.sub(r"^(from __future__ import annotations\n\n)", rf"\1{need}\n", text,
                          count=1, flags=re.M)
    if not re.search(r"^from typing import .*\bAny\b", text, re.M):
        text = re.sub(r"^from typing import ", "from typing import Any, ", text, count=1,
                      flags=re.M)
    own = bool(re.search(r"^def __getattr__\(", text, re.M))
    init.write_text(text.rstrip("\n") + "\n" + compat_block(own), encoding="utf-8")
    return True


# --- the whole tree --------------------------------------------------------------------------

def _files(root: Path) -> list[Path]:
    out = []
    for path in sorted(root.rglob("*")):
        if any(part in SKIP_DIRS for part in path.relative_to(root).parts):
            continue
        if path.is_file() and (path.suffix in TEXT_SUFFIXES or path.name == "course"):
            out.append(path)
    return out


def run(root: Path, check: bool = False) -> list[str]:
    """Move and rewrite the checkout at ``root``; the paths changed (or that would be)."""
    pkg = root / "src" / "cudacourse"
    add_registry_topics(pkg)
    if check:
        left = [f"src/cudacourse/{m}.py" for m in MOVED if (pkg / f"{m}.py").exists()]
        if COMPAT_MARK not in (pkg / "__init__.py").read_text(encoding="utf-8"):
            left.append("src/cudacourse/__init__.py")
    else:
        left = [str(old.relative_to(root)) for old, _ in move(pkg)]
        if add_compat(pkg / "__init__.py"):
            left.append("src/cudacourse/__init__.py")
    this = Path(__file__).resolve()
    for path in _files(root):
        if path.resolve() == this:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if SKIP_MARK in text:
            continue
        new = text
        if path.suffix == ".py":
            if pkg in path.parents:
                module = _module_name(pkg, path)
                new = _rewrite_relative(new, path, pkg, _package_of(module, path))
            new = rewrite_imports(new)
        if path.parent == root / "lessons":  # a lesson's markdown (translated) stays as it is
            new = "".join(line if line.startswith("#") else rewrite_text(line)
                          for line in new.splitlines(keepends=True))
        else:
            new = rewrite_text(new)
        if new != text:
            left.append(str(path.relative_to(root)))
            if not check:
                path.write_text(new, encoding="utf-8")
    return sorted(set(left))


def _old_package(pkg: Path, path: Path, package: str) -> str:
    """Where a moved module's relative imports were written from: the top of the package."""
    rel = path.relative_to(pkg)
    if len(rel.parts) == 2 and rel.parts[0] in LAYERS and rel.stem in LAYERS[rel.parts[0]]:
        return "cudacourse"
    return package


def _rewrite_relative(src: str, path: Path, pkg: Path, package: str) -> str:
    """Relative imports of a file of the package: resolved from where they were written
    (a moved module's from the package's top), re-relativized from where the file is."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    old_pkg = _old_package(pkg, path, package)
    if old_pkg != package and _already_relative_to_layer(tree):
        old_pkg = package  # moved on an earlier run: its imports were rewritten then
    lines = _offsets(src)
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = _absolute(node, old_pkg)
        groups: dict[str, list[ast.alias]] = {}
        for a in node.names:
            full = new_name(f"{base}.{a.name}")
            target = full.rsplit(".", 1)[0] if full != f"{base}.{a.name}" else new_name(base)
            groups.setdefault(target, []).append(a)
        stmts = []
        for target, aliases in groups.items():
            level, mod = _relative(target, package)
            stmts.append(f"from {'.' * level}{mod} import {', '.join(map(_alias, aliases))}")
        start = lines[node.lineno - 1] + node.col_offset
        end = lines[node.end_lineno - 1] + node.end_col_offset
        wanted_same = (len(stmts) == 1 and node.level == _relative(
            next(iter(groups)), package)[0] and (node.module or "") == _relative(
            next(iter(groups)), package)[1])
        if wanted_same:
            continue
        indent = " " * node.col_offset
        edits.append((start, end, ("\n" + indent).join(_wrap(s, indent) for s in stmts)))
    for start, end, text in sorted(edits, reverse=True):
        src = src[:start] + text + src[end:]
    return src


def _already_relative_to_layer(tree: ast.Module) -> bool:
    """A moved module rewritten before reaches the package's top with ``..``."""
    return any(isinstance(n, ast.ImportFrom) and n.level >= 2 for n in ast.walk(tree))


def main(argv: list[str]) -> int:
    check = "--check" in argv
    root = Path(argv[argv.index("--root") + 1]).resolve() if "--root" in argv else \
        Path(__file__).resolve().parents[2]
    changed = run(root, check)
    for rel in changed:
        print(("would change " if check else "changed ") + rel)
    return 1 if check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
