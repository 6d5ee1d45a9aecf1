"""Formative or graded questions, chosen per assignment when the learner copy is generated.

``nbgrader_config.py`` runs ``QuizMode`` first in ``nbgrader generate_assignment`` (which
``cudacourse build`` runs). The master always holds the formative form, with the key token
that ``cudacourse build`` wrote from the instructor-side keys (``cudacourse.course.quiz.embed_keys``)::

    quiz.ask("03_memory.pinned", key="<token>")                  # ordinary cell
    answer_pinned = "b"                                          # solution cell
    quiz.grade("03_memory.pinned", answer_pinned, key="<token>") # test cell

* **formative** (the default): instant right/wrong in the widget and in the test cell, which
  is worth 0 points (a question anyone can check before submitting cannot be worth points);
  the copy's tokens lose the explanation (``learner_token``): only the option a learner
  gives opens its own feedback;
* **graded**: the widget records a choice without judging it, the visible test cell only
  checks the form of the answer (``quiz.record``), and the real check moves into hidden tests
  that nbgrader puts back at autograding, with the full explanation in the feedback. The
  learner copy keeps no key token: one left outside hidden tests stops the build.

Configure in ``nbgrader_config.py``::

    c.QuizMode.graded = ["03_memory"]          # assignments whose questions are graded
    c.QuizMode.points = 1                      # points per graded question

This module imports nothing from the ``cudacourse`` package (nbgrader loads it by path), so
the nbgrader process never chooses a device.
"""

from __future__ import annotations

import base64
import json
import re

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Float, List, Unicode

_KEY = r',\s*key="[\w-]*"'
_GRADE = re.compile(rf'^quiz\.grade\((?P<q>"[\w.]+"),\s*(?P<var>\w+)(?P<key>{_KEY})?\)\s*$',
                    re.M)
_ASK = re.compile(rf'^quiz\.ask\((?P<q>"[\w.]+")(?:{_KEY})?\)\s*$', re.M)
_HIDDEN = re.compile(r"^### BEGIN HIDDEN TESTS$.*?^### END HIDDEN TESTS$", re.M | re.S)


_TOKEN = re.compile(r'(,\s*key=")([\w-]+)(")')


def learner_token(token: str) -> str:
    """A key token as a learner copy may hold it: without the explanation ("r"), which
    gives the answer away; the sealed entries stay (``cudacourse.course.quiz``, token version 3).
    The master keeps it: the grader runs the master's test cells."""
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except ValueError:
        return token  # not a token this module knows: quiz.with_token names the problem
    if not isinstance(payload, dict) or "r" not in payload:
        return token
    payload.pop("r")
    raw = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def learner_source(source: str) -> str:
    """``source`` with every key token in its learner form (``learner_token``)."""
    return _TOKEN.sub(lambda m: m[1] + learner_token(m[2]) + m[3], source)


def graded_source(source: str) -> str:
    """The graded form of a question's test cell: form check visible, grading hidden."""
    return _GRADE.sub(
        lambda m: (f"quiz.record({m['q']}, {m['var']})  # graded after you submit\n"
                   "### BEGIN HIDDEN TESTS\n"
                   f"quiz.grade({m['q']}, {m['var']}{m['key'] or ''}, reveal=True)\n"
                   "### END HIDDEN TESTS"), source)


class QuizMode(Preprocessor):
    """Rewrite question cells for the assignment's mode (see the module docstring)."""

    graded = List(Unicode(), help="assignments whose questions are graded (hidden until "
                  "autograding); all others are formative (instant feedback, 0 points)"
                  ).tag(config=True)
    points = Float(1.0, help="points per question in a graded assignment").tag(config=True)
    enabled = Bool(True)  # nbconvert runs a registered preprocessor only when enabled

    def mode(self, assignment: str) -> str:
        return "graded" if assignment in self.graded else "formative"

    def preprocess(self, nb, resources):  # noqa: ANN001 - nbconvert's signature
        assignment = resources.get("nbgrader", {}).get("assignment", "")
        graded = self.mode(assignment) == "graded"
        nb.metadata.setdefault("cudacourse", {})["quiz_mode"] = self.mode(assignment)
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade") and _GRADE.search(cell.source):
                if graded:
                    cell.source = graded_source(cell.source)
                    meta["points"] = self.points
                else:
                    meta["points"] = 0.0
                    cell.source = learner_source(cell.source)
            elif graded and not meta and _ASK.search(cell.source):
                cell.source = _ASK.sub(lambda m: f"quiz.ask({m['q']}, graded=True)", cell.source)
            elif not graded:
                cell.source = learner_source(cell.source)
            if graded and re.search(_KEY, _HIDDEN.sub("", cell.source)):
                raise ValueError(f"{assignment}: a key token would reach the learner copy of a "
                                 f"graded assignment, in cell {cell.get('id')!r}")
        return nb, resources
