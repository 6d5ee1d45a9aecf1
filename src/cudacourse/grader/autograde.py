"""nbgrader's execute step for cudacourse: learner code never runs in nbgrader's process.

``ResilientExecute`` replaces nbgrader's ``Execute`` preprocessor in ``nbgrader autograde``
(``nbgrader_config.py`` registers it). nbgrader still does everything around it (restores
the locked cells from the master, scores test cells by whether their outputs hold an error,
writes the gradebook, feedback and export); this step only puts outputs into the notebook:

* each graded test cell's outputs come from its **verdict**: a clean, sandboxed process that
  runs the master's context, the learner's definitions that pass a static allow-list, and the
  master's test cell (``cudacourse.grader.verdict``); nothing the learner's kernel does can
  reach it;
* the other cells' outputs come from the **feedback run**: the whole submission executed in
  a sandbox (``cudacourse.grader.nbrun``), with its test cells blanked, outputs sanitised to
  text, images and errors, and capped;
* a "Grading note" cell at the top, and ``<notebook>.grading.json`` beside the autograded
  notebook, list the incidents (hangs, crashes, refused constructs, tampering the in-kernel
  audit saw, and the sandbox's isolation when it is not bubblewrap).

``cudacourse grade`` computes all of that per student, in parallel, before nbgrader runs, and
passes ``--ResilientExecute.results_dir``; under plain ``nbgrader autograde`` this step
computes it itself (same sandbox, one notebook at a time).

``nbgrader_config.py`` imports it as ``cudacourse.grader.autograde``: importing the package
chooses no device (``cudacourse.setup`` does), so nbgrader's process stays device-neutral.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import Execute
from traitlets import Bool, Dict, Integer, Unicode

from . import budget, feedbackview, policy, prepare, untrusted
from .lang import T, language, of_notebook

NOTE_ID = "cudacourse-grading-note"
LOG_PREFIX = "cudacourse-grading:"


class ResilientExecute(Execute):
    """nbgrader's Execute, replaced by sandboxed verdicts and a sandboxed feedback run."""

    timeout = Integer(120, allow_none=True, help=(
        "Seconds a cell may run (in the feedback run, and per test cell's verdict). The "
        "simulator is slow: keep it generous there.")).tag(config=True)
    feedback_timeout = Integer(None, allow_none=True, help=(
        "Seconds a cell may run in the feedback run (default: timeout); no point comes from "
        "that run.")).tag(config=True)
    notebook_timeout = Integer(900, help="Seconds for a whole feedback run.").tag(config=True)
    max_restarts = Integer(3, help="Kernel restarts per feedback run.").tag(config=True)
    output_cap = Integer(20_000, help="Characters of output kept per cell.").tag(config=True)
    audit = Bool(True, help="Run the in-kernel tamper audit in the feedback run (a hint for "
                             "the instructor; points never depend on it).").tag(config=True)
    feedback_run = Bool(True, help="Execute the whole submission for feedback outputs.").tag(
        config=True)
    results_dir = Unicode("", help=(
        "Directory with results that `cudacourse grade` prepared "
        "(<student>/<assignment>/<notebook>.json); empty: compute them here.")).tag(config=True)
    output_budget = Dict({}, help="cudacourse.grader.budget.OutputBudget fields: a notebook's "
                                  "totals, e.g. {'total_bytes': 6291456, 'images': 40}.").tag(
        config=True)
    sandbox = Dict({}, help="cudacourse.grader.sandbox.Sandbox fields, e.g. "
                            "{'mode': 'bwrap', 'require': True}.").tag(config=True)

    def options(self) -> dict[str, Any]:
        return {"timeout": self.timeout or 120, "feedback_timeout": self.feedback_timeout,
                "notebook_timeout": self.notebook_timeout,
                "max_restarts": self.max_restarts, "output_cap": self.output_cap,
                "audit": self.audit, "feedback_run": self.feedback_run,
                "output_budget": dict(self.output_budget), "sandbox": self._sandbox()}

    def _sandbox(self) -> dict[str, Any]:
        """The configured sandbox, with the course's exchange (if configured) hidden too."""
        sb = dict(self.sandbox)
        exchange = self.config.get("Exchange", {}).get("root")
        if isinstance(exchange, str) and exchange:
            sb["hide"] = sorted({*sb.get("hide", []), str(Path(exchange).resolve())})
        return sb

    def preprocess(self, nb: NotebookNode, resources: Any = None,
                   km: Any = None) -> tuple[NotebookNode, dict]:
        info = (resources or {}).get("nbgrader", {})
        student, assignment = info.get("student", "?"), info.get("assignment", "?")
        notebook = info.get("notebook", "notebook")
        who = f"{student}/{assignment}/{notebook}"
        prepared = None
        if self.results_dir:
            path = Path(self.results_dir) / student / assignment / f"{notebook}.json"
            if path.is_file():
                prepared = json.loads(path.read_text())
        if prepared is None:
            from nbgrader.coursedir import CourseDirectory

            cd = CourseDirectory(config=self.config)
            master = Path(cd.root) / cd.source_directory / assignment / f"{notebook}.ipynb"
            self.log.info("%s %s: running the sandboxed checks here", LOG_PREFIX, who)
            prepared = prepare.prepare(nb, nbformat.read(master, as_version=4),
                                       course_root=str(Path(cd.root).resolve()),
                                       options=self.options(), db_url=info.get("db_url"),
                                       who={"student": student, "assignment": assignment,
                                            "notebook": notebook})
        problems = prepare.apply(nb, prepared, self.output_cap)
        # the notebook's total (outputs, images, Markdown), before nbgrader writes it
        problems += budget.enforce(nb, budget.OutputBudget.from_options(self.options()))
        # intake's first (what was restored or ignored on arrival), then the runs'
        incidents = (list(prepared.get("intake", [])) + list(prepared.get("incidents", []))
                     + problems)
        isolation = [i for i in prepared.get("isolation", []) if i != "bwrap"]
        incidents += [f"sandbox: {i}" for i in isolation]
        clean = untrusted.line  # incidents quote the submission: one clean line each
        for line in incidents:
            self.log.error("%s %s: %s", LOG_PREFIX, clean(who), clean(line))
        self._note(nb, incidents)
        late = self._lateness(info)
        try:  # the summary on top, questions and messages readable; never a lost grade
            feedbackview.annotate(nb, prepared.get("cells", {}), late=late)
        except Exception as exc:  # noqa: BLE001 - scores do not depend on the view
            self.log.error("%s %s: no summary: %s: %s", LOG_PREFIX, who, type(exc).__name__,
                           exc)
        if isinstance(resources, dict):
            payload = {"student": student, "assignment": assignment, "notebook": notebook,
                       "isolation": prepared.get("isolation"), "incidents": incidents,
                       "late": late,
                       "verdicts": {g: {k: v.get(k) for k in ("status", "ename", "message",
                                                                "cause", "seconds",
                                                                "diagnosis", "hint")}
                                    for g, v in prepared.get("cells", {}).items()}}
            resources.setdefault("outputs", {})[f"{notebook}.grading.json"] = (
                json.dumps(payload, indent=1).encode())
        self.log.info("%s %s: %d test cell(s), %d incident(s), prepared in %.1f s", LOG_PREFIX,
                      who, len(prepared.get("cells", {})), len(incidents),
                      prepared.get("seconds", 0.0))
        return nb, resources

    def _lateness(self, info: dict[str, Any]) -> dict[str, Any] | None:
        """Due date, time handed in, lateness and the rule, from the gradebook (nbgrader has
        stored the submission's time by now); None without a due date."""
        if not info.get("db_url"):
            return None
        try:
            return policy.lateness(info["db_url"], info.get("assignment", ""),
                                   info.get("student", ""), policy.LatePenalty(config=self.config))
        except Exception as exc:  # noqa: BLE001 - the summary goes on without the late line
            self.log.warning("%s lateness unknown: %s", LOG_PREFIX, exc)
            return None

    @staticmethod
    def _note(nb: NotebookNode, incidents: list[str]) -> None:
        if not incidents:
            return
        # Incidents quote the submission (messages its kernel reported, names it chose):
        # each is escaped, as text, never markup (SanitizeSubmission then cleans it again).
        escaped = untrusted.markdown_text
        with language(of_notebook(nb)):  # in the notebook's edition, as its summary
            lines = [T("**Grading note (cudacourse autograder).** Something in this notebook "
                       "needed the grader's attention:"), ""]
        lines += [f"- {escaped(i)}" for i in incidents[:40]]
        note = nbformat.v4.new_markdown_cell("\n".join(lines))
        if nb.get("nbformat", 4) == 4 and nb.get("nbformat_minor", 5) >= 5:
            note["id"] = NOTE_ID
        else:
            note.pop("id", None)
        nb.cells.insert(0, note)


class SanitizeSubmission(Preprocessor):
    """Everything of the submission made safe to render, in the notebook nbgrader writes:
    formgrader's view and the feedback HTML are rendered from that notebook, so both show
    sanitized markup (cudacourse.grader.untrusted.clean_notebook)."""

    # nbconvert runs a preprocessor only when enabled (its default is False)
    enabled = Bool(True, help="Sanitize the notebook (never turn this off).").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: Any = None) -> tuple[NotebookNode, Any]:
        budget.enforce(nb, budget.OutputBudget())  # bounded before anything is cleaned
        untrusted.clean_notebook(nb)
        return nb, resources


__all__ = ["ResilientExecute", "SanitizeSubmission", "LOG_PREFIX", "NOTE_ID"]
