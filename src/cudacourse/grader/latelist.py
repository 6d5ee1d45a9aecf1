"""Late submissions for formgrader's lists: the data and the page script that marks them.

nbgrader's formgrader lists (Manage Submissions, Manual Grading, Students, a student's
assignments and notebooks) show a plain "3 / 3" for a late submission; only its own page says
it was late. A grader of 200 students reads the lists. This server extension adds two
responses under ``/formgrader/cudacourse/``, so they carry formgrader's
Content-Security-Policy (:mod:`pagepolicy`):

* ``late``: JSON, one entry per late submission in the gradebook (student, assignment, its
  notebooks' submission ids, seconds late, the penalty, a label and a title to show);
* ``late.js``: ``static/formgrader_late.js``, which :mod:`pagepolicy` adds to the head of
  every formgrader page; it puts a "late" label beside the score of each row whose link
  names a late submission.

"Late" is nbgrader's: handed in after the due date in the gradebook (``policy.SyncDeadlines``
copies ``CoursePolicy.due`` there), the same test the feedback's late line uses.

Loaded by path into the instructor's server (``instructor_server_config``), like
:mod:`pagepolicy`: never by importing ``cudacourse``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().with_name("static") / "formgrader_late.js"
ROUTE = "/formgrader/cudacourse/"


def _duration(seconds: float) -> str:
    from .policy import duration  # imported as part of the package (tests, tools)

    return duration(seconds)


def late_submissions(db_url: str, course_id: str = "default",
                     duration: Any = None) -> list[dict[str, Any]]:
    """Every submission of the gradebook at ``db_url`` handed in after its due date."""
    from nbgrader.api import Gradebook

    say = duration or _duration
    out = []
    with Gradebook(db_url, course_id) as gb:
        for assignment in gb.assignments:
            if assignment.duedate is None:
                continue
            for sub in assignment.submissions:
                seconds = float(sub.total_seconds_late or 0.0)
                if seconds <= 0 or sub.timestamp is None:
                    continue
                penalty = float(sub.late_submission_penalty or 0.0)
                cost = f", -{penalty:g} points" if penalty else ", no penalty"
                out.append({
                    "student": sub.student.id, "assignment": assignment.name,
                    "notebooks": [nb.id for nb in sub.notebooks],
                    "seconds_late": seconds, "penalty": penalty,
                    "label": f"late {say(seconds)}" + (f" -{penalty:g}" if penalty else ""),
                    "title": (f"{sub.student.id}, {assignment.name}: handed in "
                              f"{sub.timestamp:%Y-%m-%d %H:%M:%S} UTC, due "
                              f"{assignment.duedate:%Y-%m-%d %H:%M:%S} UTC, "
                              f"{say(seconds)} late{cost}"),
                })
    return out


def _handlers(duration: Any) -> list[tuple[str, Any]]:
    from jupyter_server.base.handlers import JupyterHandler
    from tornado import web

    class LateList(JupyterHandler):
        @web.authenticated
        def get(self) -> None:
            formgrader = self.settings.get("nbgrader_formgrader")
            db_url = self.settings.get("nbgrader_db_url")
            late = []
            if db_url:
                course_id = getattr(getattr(formgrader, "coursedir", None), "course_id", "")
                late = late_submissions(db_url, course_id or "default", duration)
            self.set_header("Content-Type", "application/json")
            self.set_header("Cache-Control", "no-store")
            self.finish(json.dumps({"late": late}))

    class LateScript(JupyterHandler):
        @web.authenticated
        def get(self) -> None:
            self.set_header("Content-Type", "text/javascript; charset=utf-8")
            self.finish(SCRIPT.read_bytes())

    return [("late", LateList), ("late.js", LateScript)]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Jupyter server extension hook: the late list and its script under formgrader."""
    from jupyter_server.utils import url_path_join

    from .policy import duration

    base = serverapp.base_url
    routes = [(url_path_join(base, ROUTE + path), handler)
              for path, handler in _handlers(duration)]
    serverapp.web_app.add_handlers(".*$", routes)
    serverapp.log.info("cudacourse: late work marked in formgrader's lists")


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": __name__}]


__all__ = ["late_submissions", "SCRIPT", "ROUTE"]
