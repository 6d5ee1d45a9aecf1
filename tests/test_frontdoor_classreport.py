"""The class report's per-student section, its export's "did not submit", and the snapshot
that says what changed since the previous run (grader/classreport.py, provenance.py)."""

from __future__ import annotations

from cudacourse.grader import classreport, provenance


def _class() -> classreport.ClassData:
    C = classreport.CellResult
    S = classreport.Student
    ada = S("ada", submitted=True, status="graded", raw_score=3.0)
    ada.cells = {"test_q": C(0.0, 0.0, None, True, '"c"'), "test_add": C(3.0, 3.0, None, True)}
    bob = S("bob", submitted=True, status="graded", raw_score=0.0, seconds_late=9,
            late_penalty=0.0)
    bob.cells = {"test_q": C(0.0, 0.0, "AssertionError", False, '"b"'),
                 "test_add": C(0.0, 3.0, "wrong_formula <i>", False)}
    cy = S("cy", submitted=True, status="not graded", reason="missing notebook 01.ipynb")
    dan = S("dan")  # in the gradebook (another assignment's student), no submission here
    return classreport.ClassData(
        "01_a", ["test_q", "test_add"], {"test_q": 0.0, "test_add": 3.0},
        {"ada": ada, "bob": bob, "cy": cy, "dan": dan}, {}, {},
        {"test_q": "Question 1: Blocks", "test_add": "Exercise 1: write vector_add"},
        {"test_q"})


def test_a_section_per_student_says_what_each_needs_with_a_link(tmp_path):
    data = _class()
    root, out = tmp_path, tmp_path / "grading" / "01_a" / "report"
    page = root / "feedback" / "bob" / "01_a" / "01 a.html"
    page.parent.mkdir(parents=True)
    page.write_text("<html></html>")
    text = classreport.students_section(data, root, out)
    bob = text.split("### bob")[1].split("###")[0]
    # the exercise that lost points first, by its name, then the formative question
    assert bob.index("Exercise 1: write vector\\_add (0 / 3): wrong\\_formula &lt;i&gt;") < \
        bob.index('Question 1: Blocks (formative): answered "b"')
    assert "late 9 s" in bob
    assert "[01 a.html](../../../feedback/bob/01_a/01%20a.html)" in bob
    assert (out / "../../../feedback/bob/01_a/01 a.html").resolve() == page.resolve()
    ada = text.split("### ada")[1].split("###")[0]
    assert "Every graded cell right." in ada and "not generated yet" in ada
    assert "Not graded: missing notebook 01.ipynb." in text
    assert "### dan" not in text and "Did not submit (1): dan." in text


def test_the_export_tells_did_not_submit_from_zero():
    rows = {r["student_id"]: r for r in classreport.lms_rows(_class())}
    assert (rows["bob"]["submitted"], rows["bob"]["score"]) == ("yes", "0")
    assert (rows["dan"]["submitted"], rows["dan"]["score"], rows["dan"]["status"]) == (
        "no", "", "no submission")
    assert (rows["cy"]["submitted"], rows["cy"]["score"]) == ("yes", "")


def test_since_the_previous_run_counts_only_this_assignments_students(tmp_path):
    before = provenance.snapshot_of(_class(), tmp_path)
    assert sorted(before["students"]) == ["ada", "bob", "cy"]
    data = _class()
    data.students["eve"] = classreport.Student("eve")  # enrolled for lesson 4 meanwhile
    found = provenance.changes(before, provenance.snapshot_of(data, tmp_path))
    assert [c.student for c in found if c.why == "new submission"] == []
