"""The grading run's record: the table, status.csv and JSON say who was late and why points
were lost (grader/runrecord)."""

from __future__ import annotations

import csv
import json

from cudacourse.grader import runrecord

LATE = {"due": "2026-01-10 23:59 UTC", "submitted": "2026-01-13 01:00 UTC",
        "seconds_late": 2 * 86400 + 3660, "late": True, "percent": 30.0, "penalty": 0.9,
        "rule": "-10% per started day late, at most -100%"}


def _run():
    def graded(student, scores, **kw):
        return {"student": student, "assignment": "01_gpu_vs_cpu", "status": "graded",
                "reason": None, "scores": scores, "max_scores": {k: 3.0 for k in scores},
                "incidents": [], "seconds": 1.0, **kw}

    return {"assignment": "01_gpu_vs_cpu", "started": "2026-12-01T17:00:00Z", "seconds": 9,
            "isolation": "bwrap", "workers": 2, "executor": "thread", "results": [
                graded("dan", {"test_vector_add": 3.0}, late=LATE, lost=""),
                graded("carol", {"test_vector_add": 0.0}, late={**LATE, "late": False},
                       lost="test_vector_add: out holds a[i] - b[i]."),
                {"student": "bob", "assignment": "01_gpu_vs_cpu", "status": "not_graded",
                 "reason": "not valid JSON", "scores": {}, "max_scores": {}, "incidents": [],
                 "late": LATE}]}


def test_the_table_marks_late_work_and_names_the_lost_cell():
    rows = {ln.split()[0]: ln for ln in runrecord.table(_run()).splitlines()[2:5]}
    assert "3 / 3 LATE -0.9" in rows["dan"]
    assert "late 2 days 1 hour, -10% per started day late, at most -100%" in rows["dan"]
    assert "LATE" not in rows["carol"] and "test_vector_add: out holds a[i] - b[i]." in rows["carol"]
    assert "NOT GRADED" in rows["bob"] and "LATE" not in rows["bob"]  # not graded: no score


def test_status_csv_and_json_carry_lateness_workers_and_executor(tmp_path):
    paths = runrecord.write(_run(), tmp_path)
    with open(paths["csv"], newline="") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    dan = rows["dan"]
    assert (dan["late"], dan["late_penalty"], dan["due"], dan["submitted"]) == (
        "2 days 1 hour", "0.9", "2026-01-10 23:59 UTC", "2026-01-13 01:00 UTC")
    # every cell through grader.csvout: a rule that starts with '-' is text, not a formula
    assert dan["late_rule"] == "'" + LATE["rule"] and dan["score"] == "3"
    assert rows["carol"]["late"] == "" and rows["carol"]["first_lost"].startswith("test_vector")
    assert rows["bob"]["late"] == "" and rows["bob"]["score"] == ""
    record = json.loads(paths["latest"].read_text())
    assert (record["workers"], record["executor"]) == (2, "thread")


def test_no_penalty_is_no_minus_zero_and_reasons_end_between_words():
    """Issue 39: "LATE -0" for a penalty not taken; "check the arithmet" for a reason cut
    at a fixed width."""
    run = _run()
    dan = run["results"][0]
    dan["late"] = {**LATE, "penalty": 0.0, "rule": "no penalty"}
    reason = ("test_vector_add: out holds the wrong values at 1000 places; check the "
              "arithmetic of every element against the reference")
    run["results"][1]["lost"] = reason
    rows = {ln.split()[0]: ln for ln in runrecord.table(run).splitlines()[2:5]}
    assert "3 / 3 LATE " in rows["dan"] + " " and "LATE -" not in rows["dan"]
    shown = rows["carol"].split("  ")[-1]
    assert shown.endswith("…") and len(shown) <= 90
    assert reason.startswith(shown[:-1]) and reason[len(shown) - 1] == " "  # a whole word
    japanese = "あ" * 120
    assert runrecord.shortened(japanese, 90) == "あ" * 89 + "…"


def test_shortened_never_cuts_a_word_it_could_keep_whole():
    """Generated reasons (seeded): at most the width, a prefix of the reason, and where the
    reason has a space in the second half of the width, the cut falls between words."""
    import random

    rng = random.Random(39)
    for _ in range(500):
        words = ["".join(rng.choice("abcdefghij[]=.:") for _ in range(rng.randint(1, 14)))
                 for _ in range(rng.randint(1, 20))]
        text, width = " ".join(words), rng.randint(10, 100)
        got = runrecord.shortened(text, width)
        assert len(got) <= width, (text, width, got)
        if len(text) <= width:
            assert got == text
            continue
        body = got[:-1]
        assert got.endswith("…") and text.startswith(body)
        if " " in text[width // 2 + 1:width - 1]:
            assert text[len(body)] in " ,;:", (text, width, got)  # a whole word kept
