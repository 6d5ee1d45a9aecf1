"""docs/performance.md is rendered from the committed measurements, never edited by hand."""

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_performance_doc_matches_its_measurements():
    render = runpy.run_path(str(ROOT / "tools" / "probe_perfdoc.py"))["render"]
    text = render()
    assert (ROOT / "docs" / "performance.md").read_text() == text, \
        "docs/performance.md is stale: run python3 tools/probe_perfdoc.py"
    for kernel in ("attention, d = 64", "attention, d = 128", "matmul", "stencil", "LBM step"):
        assert f"**{kernel}" in text, kernel
