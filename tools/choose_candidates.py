"""Pick each kernel's fastest correct candidate from tools/probe_candidates.py's JSON and write a
CUDACOURSE_CHOICES file (``launch.chosen``), so that the bench of the same GPU run times the
winners as the public calls' choices:

    python3 tools/choose_candidates.py $OUT/probe_candidates.json > $OUT/choices.json

A candidate replaces the module's present choice (the row marked ``current``) only when its
median is at least ``MARGIN`` faster: smaller differences are within run-to-run noise. The
file's ``previous`` holds the present choices, and ``why`` each pick's medians.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

MARGIN = 0.01  # a candidate must be 1% faster than the present choice


def key(r: dict) -> tuple[str, object] | None:
    """(choice name in launch.chosen, the choice) of a probe row, or None."""
    w = r["what"]
    if w == "matmul":
        return "matmul", r["variant"]
    if w == "stencil":
        return "stencil", (r["variant"], tuple(r["block"]))
    if w == "lbm":
        return "lbm", (r["kernel"], tuple(r["block"]))
    if w == "transpose" and "fields" in r:
        return "transpose", tuple(r["fields"])
    if w == "attention" and r["shape"][2] == 128 and "fields" in r:
        return "attention_d128", tuple(r["fields"])
    return None


def choose(report: dict) -> dict:
    times: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    current: dict[str, object] = {}
    broken: set = set()
    for r in report["rows"]:
        k = key(r)
        if k is None:
            continue
        fam, choice = k
        if r.get("current"):
            current[fam] = choice
        if "ms" in r and r["ms"] == r["ms"]:  # timed (NaN in the simulator)
            times[fam][choice] += r["ms"]  # attention: non-causal + causal
        else:
            broken.add(k)
    out: dict = {"previous": {}, "why": {}}
    for fam, by in times.items():
        ok = {c: t for c, t in by.items() if (fam, c) not in broken}
        cur = current.get(fam)
        if cur not in ok or not ok:
            continue
        best = min(ok, key=ok.get)
        if ok[best] > (1 - MARGIN) * ok[cur]:
            best = cur
        names = ("lbm_kernel", "lbm_block") if fam == "lbm" else (fam,)
        values = best if fam == "lbm" else (best,)
        previous = cur if fam == "lbm" else (cur,)
        for n, v, p in zip(names, values, previous):
            out[n] = v
            out["previous"][n] = p
        out["why"][fam] = {"chosen_ms": round(ok[best], 4), "previous_ms": round(ok[cur], 4)}
    return out


if __name__ == "__main__":
    print(json.dumps(choose(json.load(open(sys.argv[1]))), indent=1))
