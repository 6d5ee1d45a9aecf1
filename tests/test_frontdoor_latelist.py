"""Late work for formgrader's lists (grader/latelist.py): which submissions, what label."""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path

from nbgrader.api import Gradebook

from cudacourse.grader import latelist


def _gradebook(tmp_path) -> str:
    url = f"sqlite:///{tmp_path}/gradebook.db"
    with Gradebook(url) as gb:
        gb.add_assignment("a1", duedate=datetime(2026, 12, 1, 10, 0, 0))
        gb.add_assignment("a2")  # no due date: nothing of it is late
        gb.add_notebook("nb", "a1")
        for sid in ("early", "late", "undated"):
            gb.add_student(sid)
        gb.add_submission("a1", "early", timestamp=datetime(2026, 12, 1, 9, 0, 0))
        late = gb.add_submission("a1", "late", timestamp=datetime(2026, 12, 1, 10, 0, 9))
        gb.add_submission("a1", "undated")
        gb.add_submission("a2", "late", timestamp=datetime(2030, 1, 1))
        late.notebooks[0].late_submission_penalty = 0.3
        gb.db.commit()
        nb_id = late.notebooks[0].id
    return url, nb_id


def test_only_submissions_after_their_due_date(tmp_path, monkeypatch):
    # nbgrader's Gradebook runs its `alembic` command: this Python's scripts first
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    url, nb_id = _gradebook(tmp_path)
    late = latelist.late_submissions(url)
    assert [(s["student"], s["assignment"]) for s in late] == [("late", "a1")]
    (entry,) = late
    assert entry["notebooks"] == [nb_id]  # what the Manual Grading rows link to
    assert entry["seconds_late"] == 9.0 and entry["penalty"] == 0.3
    assert entry["label"] == "late 9 s -0.3"
    # to the second: handed in and due must not read the same
    assert "handed in 2026-12-01 10:00:09 UTC, due 2026-12-01 10:00:00 UTC" in entry["title"]


def test_the_page_script_is_shipped_and_reads_the_list():
    text = latelist.SCRIPT.read_text()
    assert "/formgrader/cudacourse/late" in text
    assert "innerHTML" not in text  # student ids go in as text, never as markup
