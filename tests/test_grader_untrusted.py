"""Strings from a submission made safe: HTML/Markdown sanitized, records total for any text.

The hostile inputs are a catalogue, one construct per entry (issue 19, classes 1, 4, 6):
each must come out with no live markup, whatever renders it next.
"""

from __future__ import annotations

import csv
import json
import os
import re
import stat

import nbformat
import pytest
from nbconvert.filters.markdown import markdown2html

from cudacourse.grader import runrecord, untrusted

# Markdown a learner may add; each would run script or load a page if left live
HOSTILE_MARKDOWN = {
    "img onerror": "<img src=x onerror=\"document.title='pwned'\">",
    "script": "<script>document.title='pwned'</script>",
    "svg onload": "<svg onload=\"document.title='pwned'\"></svg>",
    "iframe": "<iframe src=\"/formgrader\"></iframe>",
    "javascript link": "[click](javascript:document.title='pwned')",
    "mixed-case scheme": "<a href=\"JaVaScRiPt:alert(1)\">x</a>",
    "entity scheme": "<a href=\"&#106;avascript:alert(1)\">x</a>",
    "data html": "<a href=\"data:text/html,<script>alert(1)</script>\">x</a>",
    "svg data image": "![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "style": "<style>body{display:none}</style><p style=\"background:url(x)\">p</p>",
    "form": "<form action=\"/formgrader/api/grade/1\" method=\"post\"><button>go</button></form>",
    "object": "<object data=\"x.swf\"></object><embed src=\"x\">",
    "meta refresh": "<meta http-equiv=\"refresh\" content=\"0;url=javascript:alert(1)\">",
    "base": "<base href=\"https://evil.example/\">",
    "split by a blank line": "<div>\n\n<img src=x onerror=alert(1)>\n\n</div>",
    "html in a code span": "`<img src=x onerror=alert(1)>` and <img src=x onerror=alert(1)>",
    "event on an allowed tag": "<b onclick=\"alert(1)\" onmouseover=\"alert(1)\">b</b>",
    "class hook": "<span class=\"x\" id=\"gradebook\" data-x=\"1\">s</span>",
    "protocol relative": "<a href=\"//evil.example/\">x</a>",
}
LIVE = re.compile(r"<(script|iframe|svg|style|form|object|embed|meta|base|button)\b|"
                  r"\son\w+\s*=|javascript:|data:(?!image/(png|jpeg|gif);)|"
                  r"\sstyle\s*=|\sid\s*=|href=\"//", re.I)


@pytest.mark.parametrize("label", list(HOSTILE_MARKDOWN))
def test_hostile_markdown_renders_with_no_live_markup(label):
    cleaned = untrusted.clean_markdown(HOSTILE_MARKDOWN[label])
    # rendered again, as formgrader's and feedback's templates render a Markdown cell
    html = markdown2html(cleaned)
    tags_only = re.sub(r">[^<]*<", "><", html)  # escaped text is shown, not run
    assert not LIVE.search(tags_only), (label, html)
    assert html.strip() == cleaned.strip()  # passed through verbatim: nothing re-parsed


def test_ordinary_markdown_keeps_its_meaning():
    source = ("# Results\n\nThe kernel is *fast*: `a < b` and **bold**.\n\n"
              "```python\nx = 1\n\ny = 2\n```\n\n| n | t |\n|---|---|\n| 1 | 2 |\n\n"
              "[docs](https://numba.readthedocs.io) $x^2$\n")
    html = markdown2html(untrusted.clean_markdown(source))
    for part in ("<h1", "<em>fast</em>", "<code>a &lt; b</code>", "<strong>bold</strong>",
                 "<table>", 'href="https://numba.readthedocs.io"', "$x^2$"):
        assert part in html, part
    assert "&#10;&#10;" in html  # the blank line inside the code block kept (as a newline)


def test_grading_note_text_is_escaped_as_text():
    shown = untrusted.markdown_text("cell 3 <img src=x onerror=alert(1)> [a](javascript:x)")
    html = markdown2html(shown)
    assert "<img" not in html and "<a" not in html and "&lt;img" in html


def _notebook():
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nb.metadata["title"] = "<script>x</script>"
    md = nbformat.v4.new_markdown_cell(HOSTILE_MARKDOWN["img onerror"])
    md["attachments"] = {"a.svg": {"image/svg+xml": "<svg onload=alert(1)>"},
                         "b.png": {"image/png": "iVBORw0KGgo="}}
    raw = nbformat.v4.new_raw_cell("<script>alert(1)</script>")
    raw.metadata["format"] = "text/html"
    code = nbformat.v4.new_code_cell("x = 1")
    code.metadata["nbgrader"] = {"grade_id": 'x" onfocus="alert(1)', "grade": False}
    code.outputs = [nbformat.v4.new_output("display_data", data={
        "text/html": "<img src=x onerror=alert(1)>", "application/javascript": "alert(1)",
        "image/svg+xml": "<svg onload=alert(1)>", "text/plain": "shown"}),
        nbformat.v4.new_output("stream", text="\udcff text")]
    nb.cells = [md, raw, code]
    return nb


def test_a_notebook_keeps_only_safe_parts():
    nb = untrusted.clean_notebook(_notebook())
    md, raw, code = nb.cells
    assert "onerror" not in md.source and md.source.startswith("<div class=")
    assert list(md.attachments) == ["a.svg", "b.png"] and md.attachments["a.svg"] == {}
    assert raw.source.startswith("&lt;script") and "format" not in raw.metadata
    assert code.outputs[0]["data"] == {"text/plain": "shown"}
    assert "grade_id" not in code.metadata["nbgrader"]
    assert set(nb.metadata) <= {"kernelspec", "language_info"}
    nbformat.validate(nb)
    nbformat.writes(nb).encode("utf-8")  # lone surrogate gone: any writer takes it


def test_terminal_and_csv_text_has_no_control_characters():
    s = untrusted.line("a\x1b[2J\rb\u202ec\x00d\udcff\ne")
    assert not re.search(r"[\x00-\x1f\x7f\u202e\ud800-\udfff]", s), s
    assert untrusted.csv_cell("=HYPERLINK(\"x\")").startswith("'")
    assert untrusted.csv_cell("-3") == "-3"


def _run(reason: str, db_url: str) -> dict:
    return {"assignment": "a1", "started": "2026-12-01T10:00:00Z", "isolation": "bwrap",
            "options": {"db_url": db_url, "timeout": 1}, "seconds": 1.0,
            "results": [
                {"student": "attacker", "assignment": "a1", "status": "graded", "reason": None,
                 "scores": {"t": 1.0}, "max_scores": {"t": 3.0},
                 "incidents": [reason, f"could not connect to {db_url}"]},
                {"student": "zz_after", "assignment": "a1", "status": "not_graded",
                 "reason": "not graded: x\udcff", "scores": {}, "max_scores": {},
                 "incidents": []}]}


def test_the_run_record_holds_every_student_whatever_the_text(tmp_path):
    db = "postgresql://grader:Hunter2-secret@db.example:5432/gradebook"
    hostile = "cell 1 \udcff\ud800 \x1b[31mred\r\u202e <script>"
    paths = runrecord.write(_run(hostile, db), tmp_path)
    for path in paths.values():
        data = path.read_text(encoding="utf-8")
        assert "Hunter2-secret" not in data, path.name
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path.name
        if path.suffix != ".json":
            assert "\x1b" not in data and "\r" not in data.replace("\r\n", "")
    rows = list(csv.DictReader(paths["csv"].open(encoding="utf-8")))
    assert [r["student_id"] for r in rows] == ["attacker", "zz_after"]
    assert "zz_after" in paths["summary"].read_text(encoding="utf-8")
    assert json.loads(paths["latest"].read_text())["options"]["db_url"] == \
        "postgresql://grader:***@db.example:5432/gradebook"


def test_an_older_world_readable_record_becomes_private(tmp_path):
    (tmp_path / "latest.json").write_text("{}")
    os.chmod(tmp_path / "latest.json", 0o644)
    runrecord.write(_run("x", "sqlite:///g.db"), tmp_path)
    assert stat.S_IMODE(os.stat(tmp_path / "latest.json").st_mode) == 0o600


def test_the_nbgrader_step_sanitizes_as_nbconvert_calls_it():
    """nbconvert calls a registered preprocessor (``__call__``), which does nothing unless
    it is enabled: called here exactly so."""
    from nbconvert.exporters import NotebookExporter

    from cudacourse.grader.autograde import SanitizeSubmission

    exporter = NotebookExporter()
    exporter.register_preprocessor(SanitizeSubmission)
    body, _ = exporter.from_notebook_node(_notebook())
    assert "onerror" not in body and "&lt;script" in body and "widgets" not in body


def test_cleaning_twice_changes_nothing_more():
    """Feedback cleans the autograded notebook again: same markup, no nesting."""
    once = untrusted.clean_markdown("# T\n\n```\na\n\nb\n```\n<img src=x onerror=alert(1)>")
    assert untrusted.clean_markdown(once) == once
    forged = '<div class="cudacourse-sanitized"><img src=x onerror=alert(1)></div>'
    assert "onerror" not in untrusted.clean_markdown(forged)  # the prefix buys nothing
