"""Release -> fetch -> submit -> collect through nbgrader's exchange directory, then grading
with the course's deadline and late penalty.

The instructor's course and each student's home are separate directories, as on a
JupyterHub where every user has their own; they share only the exchange root
(``c.Exchange.root``). Two students submit; the due date is configured between their two
submissions, so one is on time and one is late (by about a second, which is one started
day: 10% off with the configured policy). Grading goes through ``grade_all`` on two worker
processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from cudacourse.course import authoring
from cudacourse.grader import distributed, policy
from test_grader_distributed import ASSIGNMENT, FAST, NOTEBOOK, build, make_course, scores

pytestmark = pytest.mark.grading

COURSE_ID = "cudacourse"
PERCENT_PER_DAY = 10.0


def policy_config(due: str | None) -> str:
    """nbgrader_config.py lines that set a deadline and a late penalty (the course's own
    nbgrader_config.py installs policy.SyncDeadlines and policy.LatePenalty)."""
    lines = [
        "c.LatePenalty.penalty_method = 'percent_per_day'",
        f"c.LatePenalty.percent_per_day = {PERCENT_PER_DAY}",
    ]
    if due:
        lines.append(f"c.CoursePolicy.due = {{{ASSIGNMENT!r}: {due!r}}}")
    return "\n".join(lines)


def as_user(home: Path, exchange: Path, *args: str, student: str | None = None):
    """nbgrader as a student: their own home and working directory, the shared exchange."""
    env = distributed.nbgrader_env()
    env["HOME"] = str(home)
    env.pop("JUPYTER_CONFIG_DIR", None)
    cmd = [sys.executable, "-m", "nbgrader", *args, f"--Exchange.root={exchange}",
           f"--CourseDirectory.course_id={COURSE_ID}"]
    if student:
        cmd.append(f"--student={student}")
    return subprocess.run(cmd, cwd=home, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def exchanged(tmp_path_factory):
    base = tmp_path_factory.mktemp("hub")
    exchange, course_dir = base / "exchange", base / "course"
    exchange.mkdir()
    exchange.chmod(0o777)  # as on a hub: every user writes to inbound/
    course_dir.mkdir()
    course = make_course(course_dir, config=f"c.Exchange.root = {str(exchange)!r}\n"
                         f"c.CourseDirectory.course_id = {COURSE_ID!r}")
    out = {"base": base, "exchange": exchange, "course": course_dir, "steps": {}}
    out["steps"]["release"] = distributed.nbgrader(course_dir, "release_assignment",
                                                   ASSIGNMENT)
    roster = {"early": "wrong_kernel", "tardy": "correct"}
    for student, kind in roster.items():
        home = base / "home" / student
        home.mkdir(parents=True)
        out["steps"][f"fetch {student}"] = as_user(home, exchange, "fetch_assignment",
                                                   ASSIGNMENT)
        fetched = home / ASSIGNMENT / NOTEBOOK
        # the student does the work in the fetched copy
        learner = nbformat.read(fetched, 4)
        nbformat.write(build(kind, learner, course["master"])[0], fetched)
        out["steps"][f"submit {student}"] = as_user(home, exchange, "submit", ASSIGNMENT,
                                                    student=student)
        if student == "early":
            time.sleep(0.5)
            due = datetime.now(timezone.utc)
            out["due"] = due
            time.sleep(1.0)
    # the deadline fell between the two submissions
    with open(course_dir / "nbgrader_config.py", "a") as fh:
        fh.write("\n" + policy_config(policy.utc_timestamp(out["due"])) + "\n")
    out["steps"]["collect"] = distributed.nbgrader(course_dir, "collect", ASSIGNMENT)
    with distributed.open_executor(distributed.ExecutorChoice("processes", workers=2)) as (
            executor, described):
        out["results"], out["throughput"] = distributed.grade_all(
            course_dir, ASSIGNMENT, distributed.submitted_students(course_dir, ASSIGNMENT),
            executor, FAST, job=distributed.autograde_one, describe=described)
    out["steps"]["export"] = distributed.nbgrader(course_dir, "export", "--to",
                                                  str(course_dir / "grades.csv"))
    return out


def test_every_exchange_step_succeeds(exchanged):
    failed = {k: (p.returncode, p.stderr[-1500:]) for k, p in exchanged["steps"].items()
              if p.returncode != 0}
    assert not failed, failed
    assert (exchanged["exchange"] / COURSE_ID / "outbound" / ASSIGNMENT / NOTEBOOK).exists()
    inbound = sorted(p.name.split("+")[0] for p in
                     (exchanged["exchange"] / COURSE_ID / "inbound").iterdir())
    assert inbound == ["early", "tardy"]


def test_collect_places_submissions_with_their_timestamps(exchanged):
    for student in ("early", "tardy"):
        dest = exchanged["course"] / "submitted" / student / ASSIGNMENT
        assert (dest / NOTEBOOK).exists()
        stamp = (dest / "timestamp.txt").read_text().strip()
        assert stamp.endswith("UTC"), stamp


def test_the_late_submission_is_penalised_and_the_other_is_not(exchanged):
    from nbgrader.api import Gradebook

    assert all(r["ok"] for r in exchanged["results"]), exchanged["results"]
    db = distributed.default_db(exchanged["course"])
    with Gradebook(db) as gb:
        assignment = gb.find_assignment(ASSIGNMENT)
        # SyncDeadlines wrote the configured due date into the gradebook (formgrader shows it)
        assert abs((assignment.duedate.replace(tzinfo=timezone.utc) -
                    exchanged["due"]).total_seconds()) < 1e-3
        subs = {s.student_id: s for s in gb.assignment_submissions(ASSIGNMENT)}
        early, tardy = subs["early"], subs["tardy"]
        assert early.total_seconds_late == 0
        assert 0 < tardy.total_seconds_late < 60
        # the gradebook's score is the raw score; the penalty is stored beside it
        raw = {k: s.score for k, s in subs.items()}
        assert early.late_submission_penalty == 0
        # one started day late: PERCENT_PER_DAY of the notebook's score
        assert raw["tardy"] > 0
        assert tardy.late_submission_penalty == pytest.approx(
            raw["tardy"] * PERCENT_PER_DAY / 100)
    assert scores(db) == pytest.approx(raw)


def test_the_export_shows_due_date_timestamp_and_penalty(exchanged):
    import csv

    with open(exchanged["course"] / "grades.csv") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    tardy = rows["tardy"]
    assert tardy["duedate"] and tardy["timestamp"]
    assert float(tardy["late_submission_penalty"]) > 0
    assert float(rows["early"]["late_submission_penalty"]) == 0
    assert float(tardy["score"]) == pytest.approx(float(tardy["raw_score"]) -
                                                  float(tardy["late_submission_penalty"]))


# --- the penalty rule itself ---------------------------------------------------------------

def _late(**kw) -> policy.LatePenalty:
    return policy.LatePenalty(**kw)


def test_percent_per_day_counts_started_days_up_to_the_cap():
    late = _late(penalty_method="percent_per_day", percent_per_day=10, max_percent=25)
    assert late.percent(0) == 0
    assert late.percent(1) == 10
    assert late.percent(86400) == 10
    assert late.percent(86401) == 20
    assert late.percent(10 * 86400) == 25
    assert late.late_submission_penalty("s", 8.0, 2 * 86400) == pytest.approx(1.6)


def test_grace_and_methods():
    assert _late(penalty_method="percent_per_day", grace_minutes=10).percent(599) == 0
    assert _late(penalty_method="percent_per_day", grace_minutes=10).percent(601) == 10
    assert _late(penalty_method="zero").late_submission_penalty("s", 8.0, 5) == 8.0
    assert _late(penalty_method="none").late_submission_penalty("s", 8.0, 1e6) is None
    with pytest.raises(policy.PolicyError, match="within 0..100"):
        _late(penalty_method="percent_per_day", percent_per_day=150).percent(10)


def test_a_bad_due_date_names_the_assignment():
    bad = policy.CoursePolicy(due={"01_gpu_vs_cpu": "next tuesday-ish"})
    with pytest.raises(policy.PolicyError, match="01_gpu_vs_cpu.*is not a date"):
        bad.deadlines()


def test_timestamp_round_trips_through_nbgrader():
    from nbgrader.utils import parse_utc

    when = datetime(2026, 12, 8, 23, 59, 30, 123456, tzinfo=timezone.utc)
    assert parse_utc(policy.utc_timestamp(when)) == when.replace(tzinfo=None)


def test_the_course_config_installs_the_policy_with_nothing_late_by_default():
    """nbgrader_config.py: SyncDeadlines before anything else, LatePenalty as nbgrader's
    plugin, imported as cudacourse.grader.policy (the package's one name); no due date, no
    penalty."""
    config = policy.load_config(authoring.ROOT)
    steps = config.Autograde.autograde_preprocessors
    names = [(s.__module__, s.__name__) for s in steps]
    assert names[0] == ("cudacourse.grader.policy", "SyncDeadlines")
    assert ("nbgrader.preprocessors.latesubmissions", "AssignLatePenalties") in names[1:]
    plugin = config.AssignLatePenalties.plugin_class
    assert (plugin.__module__, plugin.__name__) == ("cudacourse.grader.policy", "LatePenalty")
    course_policy, late = policy.CoursePolicy(config=config), policy.LatePenalty(config=config)
    assert course_policy.due == {} and late.penalty_method == "none"
    assert late.late_submission_penalty("s", 10.0, 30 * 86400) is None


def test_policy_is_read_from_the_course_config(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.Autograde.autograde_preprocessors = []\n" + policy_config("2026-12-08 23:59:00 Europe/Paris"))
    course_policy, late = policy.policy_of(tmp_path)
    assert course_policy.deadlines() == {ASSIGNMENT: datetime(2026, 12, 8, 22, 59)}
    assert late.penalty_method == "percent_per_day"
    assert policy.describe(tmp_path)[0] == f"{ASSIGNMENT}: due 2026-12-08 22:59 UTC"


# --- cudacourse collect on the same exchange: identity and time from the platform ----------------

def _course_on(exchanged, tmp_path) -> Path:
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.Exchange.root = {str(exchanged['exchange'])!r}\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n")
    return course


def test_cudacourse_collect_times_each_hand_in_by_the_platform_not_the_learner(exchanged,
                                                                              tmp_path):
    """nbgrader submit ran as this user for both students: the roster says so (uid). The
    deadline fell between the two submissions; the collector's times (the kernel's change
    time of each inbound folder, never its name or timestamp.txt) put early before it and
    tardy after it, though the collection itself runs long after both."""
    from cudacourse.grader import collect, handins

    course = _course_on(exchanged, tmp_path)
    me = os.geteuid()
    (course / "roster.csv").write_text(f"student_id,uid\nearly,{me}\ntardy,{me}\n")
    from cudacourse.grader import roster

    done = collect.collect_exchange(course, ASSIGNMENT, roster=roster.find(course))
    assert sorted(done.collected) == ["early", "tardy"], done.lines()
    ok_e, early = handins.lookup(course, ASSIGNMENT, "early")
    ok_t, tardy = handins.lookup(course, ASSIGNMENT, "tardy")
    assert ok_e and ok_t
    assert early < exchanged["due"] < tardy
    assert (course / "submitted" / "tardy" / ASSIGNMENT / collect.LEARNER_TIMESTAMP).exists()


def test_cudacourse_collect_refuses_an_entry_its_student_does_not_own(exchanged, tmp_path,
                                                                      capsys):
    """The roster gives tardy another account: the inbound folder named for tardy (made by
    this user) is not theirs, and the CLI says by whom it is owned."""
    from cudacourse import cli

    course = _course_on(exchanged, tmp_path)
    me = os.geteuid()
    (course / "roster.csv").write_text(f"student_id,uid\nearly,{me}\ntardy,{me + 4242}\n")
    rc = cli.main(["collect", ASSIGNMENT, "--course", str(course)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "collected: early" in out
    assert f"owned by uid {me}, not by tardy's account" in out
    assert not (course / "submitted" / "tardy").exists()
