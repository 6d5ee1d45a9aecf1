"""The package's shape: no import cycle in src/cudacourse, grading only in cudacourse.grader,
one name per module, private modules private.

A cycle is a set of modules that import each other, directly or through others (a strongly
connected component of the import graph, read from the source with ``ast``, every import
counted: top-level, inside functions, under ``TYPE_CHECKING``). Where two modules need each
other, the part they share becomes its own module below both (docs/architecture.md).

A grading module is one that drives nbgrader's grading (imports ``nbgrader``), one that
``nbgrader_config.py`` loads, or one named for grading; all of them live in grader/.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from cudacourse.course import authoring

ROOT = authoring.ROOT
PACKAGE = ROOT / "src" / "cudacourse"
GRADER = "cudacourse.grader"



def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module under ``root`` by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _targets(name: str, path: Path, node: ast.AST, known: dict[str, Path]) -> list[str]:
    """The package's modules one import statement of module ``name`` names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        parent = package[:len(package) - node.level + 1]
        base = ".".join(parent + [node.module] if node.module else parent)
    else:
        base = node.module or ""
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append(sub if sub in known else base)  # `from . import x`: the module x
    return [t for t in out if t in known]


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (itself left out)."""
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[name] = {t for node in ast.walk(tree)
                       if isinstance(node, (ast.Import, ast.ImportFrom))
                       for t in _targets(name, path, node, known) if t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(frozenset(component))
    return found


def _imports_nbgrader(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "nbgrader"
                                                for a in node.names):
            return True
        if (isinstance(node, ast.ImportFrom) and not node.level and node.module
                and node.module.split(".")[0] == "nbgrader"):
            return True
    return False


def loaded_by_nbgrader_config(config: Path = ROOT / "nbgrader_config.py") -> set[str]:
    """The package modules nbgrader_config.py imports (``from cudacourse.x import y`` is
    cudacourse.x, and cudacourse.x.y when that is a module)."""
    tree = ast.parse(config.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "cudacourse"}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module and \
                node.module.split(".")[0] == "cudacourse":
            out |= {node.module} - {"cudacourse"}  # the package itself is not a grading module
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def grading_outside_grader(known: dict[str, Path],
                           config: Path = ROOT / "nbgrader_config.py") -> set[str]:
    """Modules outside cudacourse.grader that are grading modules (see the docstring)."""
    outside = {n for n in known if n != GRADER and not n.startswith(GRADER + ".")}
    return ({n for n in outside if _imports_nbgrader(known[n])}
            | {n for n in outside if n.rsplit(".", 1)[-1].startswith("grading")}
            | (loaded_by_nbgrader_config(config) & outside))


KNOWN = modules()


def test_the_graph_sees_relative_and_absolute_imports():
    graph = import_graph(KNOWN)
    assert "cudacourse.check.kit" in graph["cudacourse.check.vector"]  # from . import kit as K
    assert "cudacourse.check._engine" in graph["cudacourse.check.kit"]  # from . import _engine
    assert "cudacourse.runtime.device" in graph["cudacourse"]  # from . import device
    assert "cudacourse.bench.core" in graph["cudacourse.bench.cases"]


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": set()}
    assert cycles(graph) == {frozenset({"a", "b", "c"})}
    assert cycles({"a": {"b"}, "b": set()}) == set()


def test_no_import_cycle():
    found = cycles(import_graph(KNOWN))
    assert not found, ("import cycles in src/cudacourse (move the shared part into its own "
                       "module below both): "
                       + "; ".join(" <-> ".join(sorted(c)) for c in sorted(found, key=sorted)))


def test_grading_lives_in_the_grader_package():
    found = grading_outside_grader(KNOWN)
    assert not found, f"grading modules outside {GRADER}: {sorted(found)}"


def test_a_scratch_package_with_a_cycle_and_stray_grading_is_caught(tmp_path):
    pkg = tmp_path / "cudacourse"
    (pkg / "grader").mkdir(parents=True)
    files = {"__init__.py": "", "a.py": "from .b import x\n",
             "b.py": "def f():\n    from . import a\n",  # an import inside a function counts
             "marks.py": "import nbgrader.api\n", "grading_extra.py": "",
             "helper.py": "", "grader/__init__.py": "from nbgrader.preprocessors import Execute\n"}
    for rel, text in files.items():
        (pkg / rel).write_text(text)
    config = tmp_path / "nbgrader_config.py"
    config.write_text("from cudacourse import helper\nfrom cudacourse.grader import x\n")
    known = modules(pkg)
    assert cycles(import_graph(known)) == {frozenset({"cudacourse.a", "cudacourse.b"})}
    assert grading_outside_grader(known, config) & set(known) == {
        "cudacourse.marks", "cudacourse.grading_extra", "cudacourse.helper"}


# --- one name per module; private modules stay private --------------------------------------

def _owner(module: str) -> str:
    """The package a module belongs to: ``cudacourse.check._engine`` -> ``cudacourse.check``."""
    return module.rsplit(".", 1)[0]


def private_uses(known: dict[str, Path]) -> set[tuple[str, str]]:
    """(importer, module) where an underscored module is imported from outside its package
    (``cudacourse.check._failure`` from ``cudacourse.grader.partial``). A package's own
    modules, and its subpackages, may use it: that is what the underscore says."""
    graph = import_graph(known)
    out = set()
    for importer, targets in graph.items():
        for target in targets:
            if not target.rsplit(".", 1)[-1].startswith("_"):
                continue
            inside = importer == _owner(target) or importer.startswith(_owner(target) + ".")
            if not inside:
                out.add((importer, target))
    return out


def test_no_underscored_module_is_used_outside_its_package():
    found = private_uses(KNOWN)
    assert not found, ("private modules used from outside their package (give the part they "
                       "need a public home, as check.kit does for the checkers): "
                       + "; ".join(f"{a} -> {b}" for a, b in sorted(found)))


# By-path loading that stays, each for a reason: the compile/replay child must choose its
# mode (a fake sm_90 GPU, or the simulator) before anything of the package is imported, and
# must never appear among the package's modules (the grading audit compares them).
BY_PATH_ALLOWED = {"cudacourse.check._child", "cudacourse.check._compile",
                   # loads each mutant (a master with one mistake) from the file it wrote,
                   # as _child loads a submission's code: never the package itself
                   "cudacourse.check.mutate.runner"}
BY_PATH = re.compile(r"spec_from_file_location|run_path|SourceFileLoader|sys\.path\.insert")


def by_path_loaders(known: dict[str, Path]) -> set[str]:
    """Modules that load a file by path or put a folder on sys.path."""
    return {n for n, p in known.items() if BY_PATH.search(p.read_text(encoding="utf-8"))}


def test_no_module_loads_the_package_by_path():
    found = by_path_loaders(KNOWN) - BY_PATH_ALLOWED
    assert not found, f"modules that load files by path or edit sys.path: {sorted(found)}"


NAMES = """
import importlib, json, pkgutil, sys
from pathlib import Path
import cudacourse, cudacourse.grader
from cudacourse.grader import policy
for m in pkgutil.iter_modules(cudacourse.grader.__path__):
    if m.name != "instructor_server_config":  # a Jupyter config file, run by Jupyter
        importlib.import_module(f"cudacourse.grader.{m.name}")
policy.load_config(sys.argv[1])  # nbgrader_config.py, as nbgrader loads it
import cudacourse.check, cudacourse.course.lessons, cudacourse.cli
src = Path(cudacourse.__file__).resolve().parent.parent
names = {}
for name, mod in list(sys.modules.items()):
    f = getattr(mod, "__file__", None)
    if f and Path(f).resolve().is_relative_to(src / "cudacourse"):
        names.setdefault(str(Path(f).resolve().relative_to(src)), []).append(name)
print(json.dumps(names))
"""


def test_every_module_is_imported_under_one_name_its_own():
    """The grader, the checkers and nbgrader's configuration loaded in one process: each
    file of the package is one module, named by its path."""
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", NAMES, str(ROOT)], capture_output=True,
                          text=True, timeout=300,
                          env={**__import__("os").environ, "CUDACOURSE_QUIET": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "cudacourse/grader/autograde.py" in names and "cudacourse/check/kit.py" in names
    wrong = {}
    for rel, got in names.items():
        want = rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        if got != [want]:
            wrong[rel] = got
    assert not wrong, f"modules under another name, or two: {wrong}"


def test_the_scans_catch_a_second_name_and_a_private_use(tmp_path):
    pkg = tmp_path / "cudacourse"
    (pkg / "check").mkdir(parents=True)
    files = {"__init__.py": "", "check/__init__.py": "", "check/_engine.py": "",
             "check/vector.py": "from . import _engine\n",
             "stray.py": "from .check import _engine\n",
             "loader.py": "import runpy\nrunpy.run_path('grader/x.py')\n"}
    for rel, text in files.items():
        (pkg / rel).write_text(text)
    known = modules(pkg)
    assert private_uses(known) == {("cudacourse.stray", "cudacourse.check._engine")}
    assert by_path_loaders(known) == {"cudacourse.loader"}
