"""Execute one submission for its feedback outputs. Run inside the sandbox:

    python -P -m cudacourse.grader.nbrun IN.ipynb OUT.ipynb OPTIONS_JSON

``OUT.ipynb`` ``-``: the result goes to stdout (nothing written in the sandbox reaches the
host). The learner's kernel never holds that stdout: this process keeps it on a descriptor
of its own that no child inherits, and fd 1 (which the kernel inherits) becomes stderr.

Its test cells were blanked by the caller (their outputs come from the verdicts), so neither
the hidden tests nor the checkers run in the learner's kernel. The learner controls this
process tree; the caller treats OUT.ipynb as untrusted (it re-caps it and keeps only the
outputs, never the cells).
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    src, dst, opts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    result = None
    if dst == "-":
        result = os.fdopen(os.dup(1), "w", encoding="utf-8")  # not inheritable (PEP 446)
        os.dup2(2, 1)
    import nbformat

    from .. import i18n
    from .kernelrun import KernelExecute
    from .lang import of_notebook

    nb = nbformat.read(src, as_version=4)
    # the incidents in the notebook's edition (its metadata), whatever the course's
    i18n.use(of_notebook(nb))
    ex = KernelExecute(timeout=opts.get("timeout", 60), max_restarts=opts.get("max_restarts", 3),
                       output_cap=opts.get("output_cap", 20_000),
                       audit=opts.get("audit", True), kernel_name="python3",
                       startup_timeout=opts.get("startup_timeout", 120))
    ex._report = lambda: None  # its note cell would shift the cells; incidents go below
    resources = {"nbgrader": {"student": opts.get("student", "?"),
                              "assignment": opts.get("assignment", "?"),
                              "notebook": opts.get("notebook", "?")}}
    nb, resources = ex.preprocess(nb, resources)
    # The incidents the in-kernel executor saw (hangs, crashes, tampering): a hint only.
    incidents = getattr(ex, "_incidents", [])
    nb.metadata["cudacourse_feedback_run"] = {"incidents": incidents[:50],
                                              "restarts": getattr(ex, "_restarts", 0)}
    if result is not None:
        nbformat.write(nb, result)
        result.close()
    else:
        nbformat.write(nb, dst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
