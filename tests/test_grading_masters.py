"""Every lesson's master, handed in as a submission, gets full marks from the verdicts.

So the grader accepts all that the lessons ask for (kernels, lesson 3's host functions
launching the master's ``scale_kernel``, constant tables) and finds each test cell's master
context. Sandboxed, verdicts only (no feedback run), in whatever mode the suite runs in.
"""

from __future__ import annotations

import nbformat
import pytest

from cudacourse.course import authoring
from cudacourse.grader import prepare

pytestmark = pytest.mark.grading
MASTERS = sorted((authoring.ROOT / "solutions").glob("*/*.ipynb"))


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.parent.name)
def test_the_master_gets_full_marks_through_the_verdicts(master, tmp_path):
    nb = nbformat.read(master, 4)
    result = prepare.prepare(nb, nb, course_root=str(tmp_path),
                             options={"timeout": 300, "feedback_run": False})
    assert result["cells"], "no test cells found"
    failing = {g: (v["status"], v.get("message", "")[:300])
               for g, v in result["cells"].items() if v["status"] != "pass"}
    assert not failing
