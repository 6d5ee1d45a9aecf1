"""Autograding a class safely: sandboxed execution, verdicts learner code cannot write.

All of the course's grading is here. The stages, in the order a submission meets them
(docs/architecture.md draws them; docs/instructors.md tells the whole story):

1. **intake** (``intake``): the submitted files checked before anything runs (names, JSON,
   UTF-8, timestamp, locked cells kept as test cells), a private staged copy with duplicate
   grade_ids graded by their first occurrence;
2. **feedback run** (``prepare.feedback_run`` -> ``nbrun`` with ``kernelrun`` and the
   in-kernel ``audit``): the whole submission executed in the sandbox, test cells blanked,
   for the feedback outputs only;
3. **verdicts** (``prepare.run_verdicts`` -> ``verdict`` with ``allowlist`` and
   ``partial``): one clean process per test cell, master context, the allowed learner
   definitions and the master test cell; pass/fail on its own channel;
4. **record** (``autograde.ResilientExecute`` inside ``nbgrader autograde``, with
   ``feedbackview`` and ``policy``): the outputs put into the notebook, the summary on top,
   deadlines and late penalties; nbgrader writes the scores into the gradebook;
5. **report** (``runrecord``: the run's summary, status CSV and JSON; ``provenance``: what
   graded and what a regrade changed; ``classreport`` on ``classdata``: what a graded class
   tells its instructor, ``cudacourse report``).

``runner`` walks one submission through them (``grade_submission``, one picklable job per
student: ``runner.STAGES``, each once, in order, each handing the submission to the next) and a class over any ``concurrent.futures.Executor`` (``grade_class``;
``distributed``: a process pool or Dask). Services the stages use: ``sandbox`` (bubblewrap,
or the documented fallback that says "NOT isolated"), ``untrusted`` (submission text made
safe wherever it goes), ``course`` (the gradebook, nbgrader in the course, workers and
GPUs). At release time ``quiz_mode`` makes questions formative or graded inside
``nbgrader generate_assignment``; ``pagepolicy`` and ``instructor_server_config`` guard
formgrader's pages.

Nothing here chooses a device: importing ``cudacourse`` does not (``cudacourse.setup`` or the
first module that needs ``numba.cuda`` does), and the grader imports no such module, so the
grading process stays device-neutral and every sandboxed child chooses its own. It is an
ordinary package, imported one way: nbgrader's config imports ``cudacourse.grader.autograde``.
"""
