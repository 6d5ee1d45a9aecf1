"""Autograding a class safely: sandboxed execution, verdicts learner code cannot write.

The pieces, in the order a submission meets them (docs/instructors.md tells the whole story):

* ``intake``    checks the submitted files before anything runs (names, JSON, UTF-8,
                timestamp, locked cells kept as test cells) and stages a private copy with
                duplicate grade_ids graded by their first occurrence;
* ``sandbox``   runs one command in bubblewrap (or, where it cannot, in the documented
                fallback that says "NOT isolated") with a fresh HOME, limits and a process
                tree that ends with it;
* ``allowlist`` the static rules that decide which learner definitions a verdict may use;
* ``verdict``   the clean process per test cell: master context, the allowed learner
                definitions, the master test cell; reports pass/fail on its own channel;
* ``nbrun``     executes the whole submission in the sandbox for the feedback outputs only;
* ``prepare``   per notebook: the feedback run plus one verdict per test cell;
* ``feedbackview`` what a grader and a learner see first: the summary on top of the
                autograded notebook (cells by name, points, cause and fix, the late rule),
                readable test-cell messages, questions shown as questions;
* ``runner``    ``grade_submission`` (one picklable job per student) and ``grade_class``
                over any ``concurrent.futures.Executor``; ``runrecord`` the
                record of a run (summary, status CSV, JSON); ``classreport`` what a
                graded class tells its instructor (``cudacourse report``).

Nothing here imports the ``cudacourse`` package (which chooses a device on import): the
grading process stays device-neutral and every sandboxed child chooses its own. nbgrader's
config loads this package by path as ``cudacourse_grader`` for the same reason.
"""
