"""Execute one submission for its feedback outputs. Run inside the sandbox:

    python -P -m cudacourse.grader.nbrun IN.ipynb OUT.ipynb OPTIONS_JSON

Its test cells were blanked by the caller (their outputs come from the verdicts), so neither
the hidden tests nor the checkers run in the learner's kernel. The learner controls this
process tree; the caller treats OUT.ipynb as untrusted (it re-caps it and keeps only the
outputs, never the cells).
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    src, dst, opts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
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
    nbformat.write(nb, dst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
