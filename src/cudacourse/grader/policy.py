"""Deadlines per assignment and a late penalty, in nbgrader_config.py, applied by nbgrader.

The configuration (nbgrader_config.py; docs/class-scale.md shows it whole)::

    c.CoursePolicy.due = {"01_gpu_vs_cpu": "2026-12-08 23:59:00 UTC",
                          "02_threads_blocks_warps": "2026-12-15 23:59:00 Europe/Paris"}
    c.LatePenalty.penalty_method = "percent_per_day"   # or "none" (nbgrader's default), "zero"
    c.LatePenalty.percent_per_day = 10                 # of the notebook's score, per started day
    c.LatePenalty.max_percent = 50                     # never more than this
    c.LatePenalty.grace_minutes = 10                   # up to this late counts as on time
    c.AssignLatePenalties.plugin_class = LatePenalty   # the class from this module

How the pieces meet nbgrader's own:

* a submission's time is the ``timestamp.txt`` beside it (``nbgrader submit`` writes it in the
  exchange, ``nbgrader collect`` copies it to ``submitted/<student>/<assignment>/``; without
  the exchange, write it yourself, e.g. ``2026-12-09 08:30:00 UTC``); ``nbgrader autograde``
  stores it in the gradebook;
* an assignment's due date lives in the gradebook (formgrader shows it, ``nbgrader export``
  has a ``duedate`` column, "late" is timestamp minus due date). :class:`SyncDeadlines`, put
  first in ``Autograde.autograde_preprocessors``, and :func:`sync_deadlines` (run by
  ``cudacourse grade`` and by hand) copy ``CoursePolicy.due`` there, so the configuration is
  the one place deadlines are written;
* nbgrader's ``AssignLatePenalties`` asks :class:`LatePenalty` for each late notebook's
  penalty and stores it; the export's ``late_submission_penalty`` and ``score`` show it.

This module imports nothing from ``cudacourse`` (nbgrader_config.py loads it by path).
"""

from __future__ import annotations

import math
import os
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.utils import parse_utc
from traitlets import Dict, Enum, Float, Unicode
from traitlets.config import Config, Configurable
from traitlets.config.loader import PyFileConfigLoader

DAY = 86400.0


class PolicyError(ValueError):
    """A due date or a penalty setting that cannot be used."""


def parse_due(assignment: str, text: str) -> datetime:
    """A configured due date as naive UTC (how nbgrader stores it); a clear error if bad."""
    try:
        when = parse_utc(text)
    except (ValueError, OverflowError) as exc:
        raise PolicyError(f"CoursePolicy.due[{assignment!r}] = {text!r} is not a date: {exc}. "
                          "Write e.g. '2026-12-08 23:59:00 UTC' or "
                          "'2026-12-08T23:59:00+01:00'") from exc
    return when


class CoursePolicy(Configurable):
    """The course's deadlines: ``c.CoursePolicy.due = {assignment: due date}``."""

    due = Dict(key_trait=Unicode(), value_trait=Unicode(), help=(
        "Due date per assignment, e.g. {'01_gpu_vs_cpu': '2026-12-08 23:59:00 UTC'}. A "
        "timezone name or offset is allowed; without one the time is UTC.")).tag(config=True)

    def deadlines(self) -> dict[str, datetime]:
        """Every configured due date, parsed (naive UTC)."""
        return {name: parse_due(name, text) for name, text in self.due.items()}


class LatePenalty(LateSubmissionPlugin):
    """nbgrader's late-submission plugin with a per-day percentage and a grace period."""

    penalty_method = Enum(("none", "zero", "percent_per_day"), default_value="none", help=(
        "'none': no penalty; 'zero': a late notebook scores 0; 'percent_per_day': "
        "percent_per_day of the notebook's score per started day late, at most "
        "max_percent.")).tag(config=True)
    percent_per_day = Float(10.0, help="Percent of the score lost per started day late."
                            ).tag(config=True)
    max_percent = Float(100.0, help="The most a late submission can lose, in percent."
                        ).tag(config=True)
    grace_minutes = Float(0.0, help="Submissions at most this many minutes late count as on "
                          "time (clock skew, a slow upload).").tag(config=True)

    def percent(self, total_seconds_late: float) -> float:
        """The percentage of the score lost for this lateness."""
        if total_seconds_late <= self.grace_minutes * 60 or self.penalty_method == "none":
            return 0.0
        if self.penalty_method == "zero":
            return 100.0
        if not 0 <= self.percent_per_day <= 100 or not 0 <= self.max_percent <= 100:
            raise PolicyError(f"LatePenalty: percent_per_day={self.percent_per_day} and "
                              f"max_percent={self.max_percent} must be within 0..100")
        days = math.ceil(total_seconds_late / DAY)
        return min(self.max_percent, self.percent_per_day * days)

    def late_submission_penalty(self, student_id: str, score: float,
                                total_seconds_late: float) -> float | None:
        pct = self.percent(total_seconds_late)
        self.log.info("late penalty for %s: %.1f h late, %s -> %.0f%% of %s", student_id,
                      total_seconds_late / 3600, self.penalty_method, pct, score)
        if pct == 0:
            return None
        return round(score * pct / 100.0, 6)


def sync_deadlines(db_url: str, policy: CoursePolicy, only: str | None = None
                   ) -> dict[str, datetime]:
    """Write the configured due dates into the gradebook (creating missing assignments)."""
    from nbgrader.api import Gradebook

    deadlines = policy.deadlines()
    if only is not None:
        deadlines = {k: v for k, v in deadlines.items() if k == only}
    if deadlines:
        with Gradebook(db_url) as gb:
            for name, when in deadlines.items():
                gb.update_or_create_assignment(name, duedate=when)
    return deadlines


class SyncDeadlines(NbGraderPreprocessor):
    """First autograde preprocessor: the assignment's configured due date into the gradebook.

    nbgrader computes lateness from the gradebook's due date; this makes ``nbgrader
    autograde`` on its own honour ``CoursePolicy.due``.
    """

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        info = resources.get("nbgrader", {})
        policy = CoursePolicy(parent=self)
        if info.get("assignment") in policy.due and info.get("db_url"):
            sync_deadlines(info["db_url"], policy, only=info["assignment"])
        return nb, resources


def load_config(course_root: str | os.PathLike) -> Config:
    """The course's nbgrader_config.py, as nbgrader reads it."""
    root = Path(course_root)
    if not (root / "nbgrader_config.py").exists():
        raise PolicyError(f"no nbgrader_config.py in {root}")
    return PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()


def policy_of(course_root: str | os.PathLike) -> tuple[CoursePolicy, LatePenalty]:
    """The deadlines and late penalty configured for the course at ``course_root``."""
    config = load_config(course_root)
    return CoursePolicy(config=config), LatePenalty(config=config)


def describe(course_root: str | os.PathLike) -> list[str]:
    """Lines for the instructor: each deadline and the penalty rule."""
    policy, late = policy_of(course_root)
    lines = [f"{name}: due {when:%Y-%m-%d %H:%M} UTC"
             for name, when in sorted(policy.deadlines().items())]
    return lines + [f"late: {rule_text(late)}"]


def _english(template: str, /, **values: Any) -> str:
    return template.format(**values)


def rule_text(late: LatePenalty, T: Any = _english) -> str:
    """The late rule in words, e.g. '-10% per started day late, at most -100%' (``T``: the
    catalogue's templates in a notebook's language, grader/lang.py; English by default)."""
    if late.penalty_method == "percent_per_day":
        rule = T("-{pct}% per started day late, at most -{most}%",
                 pct=format(late.percent_per_day, "g"), most=format(late.max_percent, "g"))
    elif late.penalty_method == "zero":
        rule = T("a late notebook scores 0")
    else:
        rule = T("no penalty for late work")
    return rule + (T(", {minutes} min grace", minutes=format(late.grace_minutes, "g"))
                   if late.grace_minutes else "")


def duration(seconds: float, T: Any = _english) -> str:
    """'2 days 1 hour', '3 hours 5 min', '40 min 12 s', '9 s' (rounded down; to the second
    under an hour, where a minute is a large part of the lateness)."""
    whole = int(max(0.0, seconds))
    minutes, secs = divmod(whole, 60)
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    words = {"day": lambda n: T("{n} day", n=n) if n == 1 else T("{n} days", n=n),
             "hour": lambda n: T("{n} hour", n=n) if n == 1 else T("{n} hours", n=n),
             "min": lambda n: T("{n} min", n=n), "s": lambda n: T("{n} s", n=n)}
    parts = ([(days, "day"), (hours, "hour")] if days else [(hours, "hour"), (mins, "min")]
             if hours else [(mins, "min"), (secs, "s")])
    return " ".join(words[unit](n) for n, unit in parts if n) or T("{n} s", n=0)


def lateness(db_url: str, assignment: str, student: str, late: LatePenalty
             ) -> dict[str, Any] | None:
    """The gradebook's view of one submission's lateness, and the rule applied to it: None
    when the assignment has no due date or the submission has no time."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gb:
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return None
        due, when = sub.duedate, sub.timestamp
        seconds = float(sub.total_seconds_late or 0.0)
        penalty = float(sub.late_submission_penalty or 0.0)
    if due is None or when is None:
        return None
    # to the second: a submission 9 s late must not show two equal times
    return {"due": f"{due:%Y-%m-%d %H:%M:%S} UTC", "submitted": f"{when:%Y-%m-%d %H:%M:%S} UTC",
            "seconds_late": seconds, "late": seconds > 0, "percent": late.percent(seconds),
            "penalty": penalty, "rule": rule_text(late),
            "rule_of": {k: getattr(late, k) for k in ("penalty_method", "percent_per_day",
                                                       "max_percent", "grace_minutes")}}


def late_line(info: dict[str, Any] | None, T: Any = _english) -> str | None:
    """The sentence a learner and a grader read: due date, lateness, rule, what it cost
    (``T`` as for :func:`rule_text`)."""
    if not info or not info.get("late"):
        return None
    if info.get("percent"):
        cost = T("-{pct}% of the score", pct=format(info["percent"], "g"))
        if info.get("penalty"):
            cost += T(" (-{points} points)", points=format(info["penalty"], "g"))
    else:
        cost = T("no penalty")
    of = info.get("rule_of")  # the rule's settings: said again in T's language
    rule = rule_text(SimpleNamespace(**of), T) if isinstance(of, dict) else info["rule"]
    return T("Handed in {submitted}, due {due}: {late} late. Rule: {rule}; applied: {cost}.",
             submitted=info["submitted"], due=info["due"],
             late=duration(info["seconds_late"], T), rule=rule, cost=cost)


def utc_timestamp(when: datetime | None = None) -> str:
    """A ``timestamp.txt`` line nbgrader reads back exactly: ``YYYY-MM-DD HH:MM:SS.ffffff UTC``."""
    when = when or datetime.now(timezone.utc)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


__all__ = ["CoursePolicy", "LatePenalty", "PolicyError", "SyncDeadlines", "describe",
           "duration", "late_line", "lateness", "load_config", "parse_due", "policy_of",
           "rule_text", "sync_deadlines", "utc_timestamp"]
