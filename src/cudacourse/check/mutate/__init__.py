"""Mutants of the masters: how well the checkers name mistakes they have never met (issue 45).

Every exercise's master (the ``[solution]`` cell of ``lessons/NN_topic.py``) is parsed, and
mutation operators (``operators``) each make one small, plausible mistake at one place in its
source: an index one off, axes swapped, a guard dropped or widened or on the other axis, a
barrier removed, a loop bound or stride changed, ``=`` for ``+=``, a sign or a constant, a
launch's geometry, two buffers swapped or aliased, a copy, sync or stream dropped. Each mutant
runs through its exercise's check (``runner``: in a child process, time-boxed), and is
classified (``classify``):

* **named**: rejected with a cause the operator's mistake is expected to produce;
* **misleading**: rejected with a specific cause that is not the mutant's (the goal: 0);
* **rejected**: rejected with the evidence only (a generic cause: wrong values shown);
* **equivalent**: accepted by the visible check and by the master's hidden cases (its output
  is the master's on every case the course checks: it must be accepted);
* **survived**: accepted by the visible check, rejected by the hidden cases;
* **timeout** / **broken**: the check ran past its time box / the mutant did not load.

``python -m cudacourse.check.mutate`` writes ``docs/mutation-report.md`` and ``.json``.
"""
