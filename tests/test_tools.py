"""tools/ keeps only maintained entry points: listed in docs/tools.md with a usage line in
their header, run by the test or script the page names; the sweeps they produced are listed
in docs/sweeps/README.md, and the modules that cite a sweep cite a listed file.

The ptx_* tools compile for sm_90 offline (the pip wheels' NVVM and ptxas), so they run here
without a GPU; the sweeps need the H200 and are only compiled (docs/tools.md says why).
"""

from __future__ import annotations

import ast
import os
import py_compile
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cudacourse.course import authoring

ROOT = authoring.ROOT
TOOLS = ROOT / "tools"
PAGE = ROOT / "docs" / "tools.md"
SWEEPS = ROOT / "docs" / "sweeps"
SCRIPTS = sorted(p for p in TOOLS.rglob("*") if p.suffix in {".py", ".sh"})


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _header(path: Path) -> str:
    """A script's header: a Python tool's module docstring, a shell script's first comments."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return ast.get_docstring(ast.parse(text)) or ""
    lines = []
    for line in text.splitlines()[1:]:  # after the #! line
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# "))
    return "\n".join(lines)


def _rows() -> dict[str, str]:
    """docs/tools.md's table rows: tool path -> its "run by" cell."""
    rows = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`tools/"):
            rows[cells[0].strip("`")] = cells[2]
    return rows


def _run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUDACOURSE_QUIET": "1"}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_every_tool_is_on_the_page_and_the_page_lists_only_tools():
    rows = _rows()
    assert sorted(rows) == [_rel(p) for p in SCRIPTS]


@pytest.mark.parametrize("path", SCRIPTS, ids=_rel)
def test_every_tool_has_a_usage_line_naming_itself(path):
    header = _header(path)
    usage = re.compile(rf"^\s*(.*\b(python3?|bash)\b.*\b{re.escape(_rel(path))}\b|"
                       rf"Usage: ``import {path.stem}``)", re.M)
    assert usage.search(header), f"{_rel(path)}: no usage line in its header"


@pytest.mark.parametrize("path", SCRIPTS, ids=_rel)
def test_what_the_page_says_runs_a_tool_names_it(path):
    runners = re.findall(r"`((?:tests|tools)/[\w/]+\.(?:py|sh))`", _rows()[_rel(path)])
    assert runners or "GPU session" in _rows()[_rel(path)], _rel(path)
    for runner in runners:
        if runner == "tests/test_tools.py" and re.search(r"compiles it|checks its syntax",
                                                          _rows()[_rel(path)]):
            continue  # test_every_tool_compiles, below, takes every tool
        assert path.name in (ROOT / runner).read_text(encoding="utf-8"), (runner, _rel(path))


@pytest.mark.parametrize("path", SCRIPTS, ids=_rel)
def test_every_tool_compiles(path, tmp_path):
    if path.suffix == ".py":
        py_compile.compile(str(path), cfile=str(tmp_path / "x.pyc"), doraise=True)
    else:
        proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def _offline(proc: subprocess.CompletedProcess) -> None:
    if proc.returncode and "offline_sm90:" in proc.stderr:
        pytest.skip(f"no offline sm_90 toolkit here: {proc.stderr.strip()[-200:]}")


@pytest.mark.parametrize("args, says", [
    (["tools/offline_sm90.py"], r"cudacourse mode: gpu \(sm_90, offline\)"),
    (["tools/ptx_matmul.py", "register128x256v4"], r"register128x256v4\s+regs \d+"),
    (["tools/ptx_attention.py", "softmax"], r"softmax t=128 shfl=True: regs \['\d+'\]"),
    (["tools/ptx_lesson6.py"], r"lbm\._lbm_fused\s+regs \d+.*f64 instructions: 0"),
], ids=lambda v: v[0] if isinstance(v, list) else "")
def test_the_offline_compile_tools_report_ptxas_figures(args, says):
    proc = _run(*args)
    _offline(proc)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(says, proc.stdout), proc.stdout[-2000:]


@pytest.mark.parametrize("tool", ["tools/lesson6_figures.py", "tools/probe_vector.py"])
def test_the_tools_with_options_describe_them(tool):
    proc = _run(tool, "--help", timeout=120)
    assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr[-2000:]


def test_every_sweep_is_listed_with_its_command():
    rows = [line for line in (SWEEPS / "README.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `")]
    for path in sorted(SWEEPS.iterdir()):
        if path.name == "README.md":
            continue
        row = next((r for r in rows if f"`{path.name}`" in r.split("|")[1]), None)
        assert row, f"docs/sweeps/{path.name} is not in docs/sweeps/README.md"
        assert re.search(r"`(python3? |ncu |bash )", row.split("|")[2]), f"{path.name}: no command"


def test_modules_cite_sweeps_that_exist():
    cited = set()
    for path in (ROOT / "src").rglob("*.py"):
        text = re.sub(r"\n#\s*", "", path.read_text(encoding="utf-8"))  # comments' line breaks
        cited |= {(path.name, c) for c in re.findall(r"docs/sweeps/([\w.*-]+\.(?:json|csv))",
                                                     text)}
    assert cited, "no module cites a sweep: the pattern is wrong"
    for module, name in sorted(cited):
        assert list(SWEEPS.glob(name)), f"{module} cites docs/sweeps/{name}, which is not there"
