"""The report: ratios, environment, JSON, markdown and the terminal table."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any


from ..runtime import device
from .core import GPU_MARKER, SCHEMA, SIM_NOTE, TIMING, Measurement
# --- the report: ratios, environment, JSON, markdown, table ----------------------------------

def ratios(measurements: dict[str, Measurement]) -> tuple[dict[str, float], dict[str, str]]:
    """(JSON ratio name -> value, ratio name -> why it has no value)."""
    values: dict[str, float] = {}
    problems: dict[str, str] = {}
    for m in measurements.values():
        pairs = ([(m.ratio, m.vs)] if m.ratio else []) + [tuple(p) for p in m.more]
        if m.status == "ok":
            values.update(m.values)
        for ratio, vs in pairs:
            if m.status != "ok":
                problems[ratio] = f"{m.status}: {m.detail}"
                continue
            if vs is None:
                if m.value is not None:
                    values[ratio] = m.value
                continue
            d = measurements.get(vs)
            if d is None or d.status != "ok":
                problems[ratio] = (f"{vs} was not measured" if d is None
                                   else f"{vs} {d.status}: {d.detail}")
                continue
            num, den = m.rate(d.kind), d.rate()
            if num and den:
                values[ratio] = num / den
    return values, problems


def _v(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def commit() -> str | None:
    """The commit measured: CUDACOURSE_COMMIT (a copy of the tree without its .git, as on
    the GPU machine), else ``git rev-parse HEAD`` in the package's checkout, else None."""
    import os
    import subprocess
    from pathlib import Path

    if os.environ.get("CUDACOURSE_COMMIT"):
        return os.environ["CUDACOURSE_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def choices() -> dict[str, Any] | None:
    """The kernel choices of CUDACOURSE_CHOICES (``launch.chosen``) this run used, if any."""
    import json
    import os

    path = os.environ.get("CUDACOURSE_CHOICES")
    if not path:
        return None
    with open(path) as f:
        return json.load(f)


def environment() -> dict[str, Any]:
    """GPU, driver, CUDA and library versions, for the record."""
    import shutil
    import subprocess

    choice = device.current()
    env: dict[str, Any] = {"mode": choice.mode, "python": platform.python_version(),
                           "platform": platform.platform()}
    if choice.gpu is not None:
        g = choice.gpu
        env.update(gpu=g.name, compute_capability=".".join(map(str, g.compute_capability)),
                   sm_count=g.sm_count, memory_gib=round(g.total_memory / 2**30, 1),
                   cuda_driver_api=f"{g.driver_version[0]}.{g.driver_version[1]}")
        smi = shutil.which("nvidia-smi")
        if smi:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip():
                env["driver"] = out.stdout.strip().splitlines()[0]
        try:
            from numba import cuda

            env["cuda_runtime"] = ".".join(map(str, cuda.runtime.get_version()))
        except Exception:  # noqa: BLE001 - informational only
            pass
    libs = {}
    for pkg in ("numpy", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "cupy", "torch", "triton",
                "tqdm", "cudacourse"):
        v = _v(pkg)
        if v:
            libs[pkg] = v
    env["libraries"] = libs
    return env


def build_report(measurements: dict[str, Measurement], *, command: str, size: str,
                 seed: int, repeats: int, env: dict[str, Any] | None = None,
                 date: str | None = None) -> dict[str, Any]:
    """The JSON document. In the simulator: statuses only, no times and no ratios."""
    env = env if env is not None else environment()
    date = date or datetime.now(timezone.utc).isoformat(timespec="seconds")
    mode = env.get("mode", device.mode())
    base = {"schema": SCHEMA, "mode": mode, "date": date, "command": command,
            "commit": commit(), "environment": env}
    picks = choices()
    if picks:
        base["choices"] = picks
    if mode == "sim":
        return {**base, "note": SIM_NOTE,
                "smoke": {m.name: m.status + (f": {m.detail}" if m.detail else "")
                          for m in measurements.values()}}
    vals, problems = ratios(measurements)
    copy, cublas = measurements.get("copy"), measurements.get("cublas_sgemm")
    ceilings = {}
    if copy and copy.status == "ok":
        ceilings["copy_gb_s"] = copy.rate() / 1e9
    if cublas and cublas.status == "ok":
        ceilings["cublas_sgemm_tflop_s"] = cublas.rate() / 1e12
    meas = {}
    for m in measurements.values():
        d = {k: v for k, v in asdict(m).items() if k not in ("name",)}
        d["median_ms"] = m.median_ms
        if m.median_ms:
            d["gb_s"] = m.rate("memory") / 1e9 if m.bytes else None
            d["tflop_s"] = m.rate("compute") / 1e12 if m.flops else None
        meas[m.name] = d
    return {**base, "size": size, "seed": seed, "repeats": repeats,
            "timing": TIMING,
            "ceilings": ceilings, "ratios": vals, "problems": problems, "measurements": meas}


def _fmt_time(ms: float | None) -> str:
    return "" if ms is None else (f"{ms:.3f}" if ms < 10 else f"{ms:.1f}")


_UNITS = (("_gib", " GiB"), ("_us", " us"), ("_mlups", " MLUPS"))


def value_unit(m: dict[str, Any]) -> str:
    """The unit of a measured value, from its ratio name's suffix (``..._us``: microseconds,
    ``..._gib``: GiB, ``..._mlups``: million lattice updates per second); none if unknown."""
    name = (m.get("ratio") or "").lower()
    return next((u for suffix, u in _UNITS if name.endswith(suffix)), "")


def carry_measurements(new: dict[str, Any], old: dict[str, Any], names: list[str],
                       why: str) -> dict[str, Any]:
    """``new`` with the measurements ``names`` copied from the earlier run ``old``, each
    marked ``carried`` with that run's date, command, commit and ``why``: for figures the
    lessons cite that the present bench no longer measures (kernels the package dropped).
    Their ratios are not carried: a ratio divides by a ceiling of its own run."""
    missing = [n for n in names if n not in old.get("measurements", {})]
    if missing:
        raise ValueError(f"the earlier run has no measurement {missing}")
    if old.get("environment", {}).get("gpu") != new.get("environment", {}).get("gpu"):
        raise ValueError("carry: the two runs were on different GPUs")
    meas = dict(new["measurements"])
    for n in names:
        if n in meas and "carried" not in meas[n]:
            raise ValueError(f"carry: {n} was measured in this run")
        meas[n] = {**old["measurements"][n], "ratio": None, "vs": None,
                   "carried": {"date": old["date"], "command": old["command"],
                               "commit": old.get("commit"), "why": why}}
    return {**new, "measurements": meas}


def table_rows(report: dict[str, Any]) -> list[list[str]]:
    """kernel, size, time, achieved, compared with, ratio: one row per measurement."""
    rows = []
    by_ratio = report.get("ratios", {})
    for name, m in report.get("measurements", {}).items():
        if m["status"] != "ok":
            rows.append([m["label"], m["shape"], m["status"], m["detail"][:90], "", ""])
            continue
        if m["kind"] == "value":
            rows.append([m["label"], m["shape"], "", f"{m['value']:.2f}{value_unit(m)}",
                         "", ""])
            continue
        rate = m.get("tflop_s") if m["kind"] == "compute" else m.get("gb_s")
        achieved = "" if rate is None else (f"{rate:.2f} TFLOP/s" if m["kind"] == "compute"
                                            else f"{rate:.0f} GB/s")
        r = by_ratio.get(m["ratio"]) if m["ratio"] else None
        label = m["label"] + (f" (carried from the run of {m['carried']['date'][:10]}: "
                              f"{m['carried']['why']})" if m.get("carried") else "")
        rows.append([label, m["shape"], _fmt_time(m["median_ms"]), achieved,
                     m["vs"] or "", "" if r is None else f"{r:.2f}"])
    return rows


HEADER = ["kernel", "size", "median ms", "achieved", "vs", "ratio"]


def format_table(report: dict[str, Any]) -> str:
    if report["mode"] == "sim":
        lines = [f"{'kernel':<40} result"]
        lines += [f"{k:<40} {v}" for k, v in report["smoke"].items()]
        return "\n".join(lines)
    rows = [HEADER] + table_rows(report)
    widths = [min(46, max(len(r[i]) for r in rows)) for i in range(len(HEADER))]
    return "\n".join("  ".join(c[:w].ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in rows)


def to_markdown(report: dict[str, Any]) -> str:
    """The committed table: what was measured, where, when, with what, by which command."""
    env = report["environment"]
    libs = ", ".join(f"{k} {v}" for k, v in env.get("libraries", {}).items())
    lines = []
    if report["mode"] == "sim":
        lines += ["# Benchmarks: simulator smoke pass (no timings)", "", SIM_NOTE, "",
                  f"Run on {report['date']} with `{report['command']}`.", "",
                  "| kernel | result |", "| --- | --- |"]
        lines += [f"| {k} | {v.replace('|', '/')} |" for k, v in report["smoke"].items()]
        return "\n".join(lines) + "\n"
    gpu = env.get("gpu", "unknown GPU")
    lines += [GPU_MARKER, "# Benchmarks: the course's kernels against measured ceilings", "",
              f"Measured on an **{gpu}** on {report['date'][:10]} ({report['date']} UTC), "
              "written by the command below. Every ratio divides by a ceiling measured in the "
              "same run: the device-to-device copy for memory-bound kernels, cuBLAS SGEMM for "
              "matmul. The copy (cudaMemcpy) is a practical ceiling, not a physical one: a "
              "kernel with enough bytes in flight can beat it by a few percent, so ratios "
              "slightly above 1 are real.", "",
              "| | |", "| --- | --- |",
              f"| GPU | {gpu} (compute capability {env.get('compute_capability', '?')}, "
              f"{env.get('sm_count', '?')} SMs, {env.get('memory_gib', '?')} GiB) |",
              f"| driver | {env.get('driver', 'unknown')} (supports CUDA "
              f"{env.get('cuda_driver_api', '?')}) |",
              f"| CUDA runtime (Numba) | {env.get('cuda_runtime', 'unknown')} |",
              f"| Python | {env.get('python')} |",
              f"| libraries | {libs} |",
              f"| command | `{report['command']}` |",
              f"| commit | {report.get('commit') or 'not recorded'} |",
              *([f"| kernel choices (CUDACOURSE_CHOICES) | `{json.dumps(report['choices'])}` |"]
                if report.get("choices") else []),
              f"| method | {report['timing']}; up to {report['repeats']} repeats; "
              f"sizes `{report['size']}`, seed {report['seed']} |", ""]
    ceil = report.get("ceilings", {})
    if ceil:
        lines += ["## Ceilings", ""]
        if "copy_gb_s" in ceil:
            lines.append(f"- device-to-device copy: **{ceil['copy_gb_s']:.0f} GB/s** "
                         "(bytes read + written)")
        if "cublas_sgemm_tflop_s" in ceil:
            lines.append(f"- cuBLAS SGEMM (CuPy): **{ceil['cublas_sgemm_tflop_s']:.1f} "
                         "TFLOP/s**")
        lines.append("")
    for mg in report.get("merges", []):
        c = mg.get("ceilings", {})
        copy = f"{c['copy_gb_s']:.0f} GB/s" if "copy_gb_s" in c else "not measured"
        lines += [f"- re-measured on {mg['date'][:10]} ({mg['date']} UTC, {mg.get('gpu', '?')})"
                  f" by `{mg['command']}`: {', '.join(mg['only'])} ({len(mg['measurements'])}"
                  f" cases); their ratios divide by that run's copy, **{copy}**", ""]
    lines += ["## Kernels", "", "| " + " | ".join(HEADER) + " |",
              "|" + "|".join(" --- " for _ in HEADER) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |"
              for r in table_rows(report)]
    lines += ["", "## Ratios (names as in the JSON)", "", "| name | value |", "| --- | --- |"]
    lines += [f"| `{k}` | {v:.3f} |" for k, v in report.get("ratios", {}).items()]
    lines += [f"| `{k}` | {v.replace('|', '/')} |" for k, v in report.get("problems", {}).items()]
    lim = report.get("limits")
    if lim:
        lines += ["", f"## Goals of issue {lim['issue']} and what stops each kernel short of "
                  "its goal", "",
                  f"Nsight Compute counters of the kernel each ratio timed, one full-size launch "
                  f"in the same GPU run (`ncu --clock-control none`; "
                  f"{', '.join(f'`{f}`' for f in lim['ncu_files'])}).", "",
                  "| ratio | value | goal | met | kernel | the limit, from its counters |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for k, g in lim["goals"].items():
            value = "" if g["value"] is None else f"{g['value']:.3f}"
            lines.append(f"| `{k}` | {value} | {g['goal']:.2f} | {'yes' if g['met'] else 'no'} "
                         f"| {g.get('kernel', '')} | {g.get('limit', '').replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def _is_gpu_result(path: Path) -> bool:
    """Whether ``path`` already holds results of a GPU run (never overwritten from the sim)."""
    try:
        text = path.read_text()
    except OSError:
        return False
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text).get("mode") == "gpu"
        except ValueError:
            return False
    return GPU_MARKER in text


COURSE_ENV = "CUDACOURSE_COURSE_ROOT"  # the course being graded (set by grader/sandbox.py)


def committed_report(path: str | Path | None = None) -> dict[str, Any] | None:
    """The GPU benchmark committed with the course (``docs/benchmarks.json``), or None.

    Looks at ``path``, else in the course being graded first (``$CUDACOURSE_COURSE_ROOT``:
    the grader's sandbox runs a submission in a scratch folder and binds the course's
    ``docs/benchmarks.json`` back at its own path, so a course folder outside the checkout
    finds its own), then for ``docs/benchmarks.json`` in the working directory, its parents
    and the package's parents (a notebook runs from ``workspace/``); only a GPU run counts (a
    simulator smoke file holds no figures).
    """
    here = Path(__file__).resolve()
    course = os.environ.get(COURSE_ENV)
    places = [Path(path)] if path else [
        p / "docs" / "benchmarks.json" for p in ([Path(course)] if course else [])
        + [Path.cwd(), *Path.cwd().parents, *here.parents]]
    for place in places:
        try:
            report = json.loads(place.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(report, dict) and report.get("mode") == "gpu":
            report["path"] = str(place)
            return report
    return None


def figure(report: dict[str, Any] | None, name: str, field: str = "tflop_s") -> float | None:
    """One number of a report: a ratio (``field="ratio"``) or a measurement's field."""
    if not report:
        return None
    if field == "ratio":
        return report.get("ratios", {}).get(name)
    return (report.get("measurements", {}).get(name) or {}).get(field)


_PEER_SHAPES = ("_d128", "_causal", "_s16384")


def plot_view(report: dict[str, Any]) -> dict[str, Any]:
    """The report with one attention shape only (16 x 4096 x 64), for the pictures.

    The PyTorch comparison adds eight shapes of five methods, and bf16 rates an order of
    magnitude above the FP32 roof: in a roofline and a bar chart they would bury the lesson
    kernels. The JSON and the markdown table keep everything.
    """
    def keep(name: str) -> bool:
        return not any(s in name for s in _PEER_SHAPES) and "bf16" not in name

    view = dict(report)
    view["measurements"] = {k: m for k, m in report.get("measurements", {}).items() if keep(k)}
    view["ratios"] = {k: v for k, v in report.get("ratios", {}).items() if keep(k)}
    return view


CEILING_CASES = ("copy", "cublas_sgemm")  # measured by every run, recorded, never merged


def _owner(name: str, entries: list[str]) -> str | None:
    """The entry a measurement named ``name`` belongs to: case names are their entry's name
    or start with it and an underscore; the longest match wins (``lbm_cupy`` is not one of
    ``lbm``'s cases)."""
    hits = [e for e in entries if name == e or name.startswith(e + "_")]
    return max(hits, key=len) if hits else None


def merge_reports(old: dict[str, Any], new: dict[str, Any], only: list[str],
                  command: str | None = None, entries: list[str] | None = None
                  ) -> dict[str, Any]:
    """``old`` with the cases of the entries ``only`` replaced by ``new``'s (a run of those
    entries alone, ``cudacourse bench --only ...``), for ``python -m cudacourse.bench
    --merge``.

    The measurements of those entries and their ratios are replaced (cases the new run no
    longer has are dropped, new ones appended); everything else, the top-level ceilings
    included, stays as measured in the old run, since the other ratios divide by them. The
    new run's ceilings are recorded with each replaced measurement (``remeasured``) and in
    ``merges``, since the replaced ratios divide by those. Refuses simulator reports (they
    hold no timings), another GPU or another size. ``entries``: every entry name of the
    registry (default: ``only``), to tell ``lbm_cupy``'s cases from ``lbm``'s."""
    names = sorted(set(entries or []) | set(only))

    def entry_of(k: str) -> str | None:
        """The entry that measured ``k``: as the run recorded it, else by name (the longest
        entry prefix; reports older than the field)."""
        m = new["measurements"].get(k) or old["measurements"].get(k) or {}
        return m.get("entry") or _owner(k, names)

    def owned(k: str) -> bool:
        """Is k one of the re-run entries' cases? A case compared with another entry's case
        belongs to that entry (``lbm_fused_vs_cupy``, vs ``lbm_cupy``, is ``lbm_cupy``'s)."""
        vs = (old["measurements"].get(k) or new["measurements"].get(k) or {}).get("vs")
        if vs and vs not in CEILING_CASES and entry_of(vs) not in only:
            return False
        return entry_of(k) in only

    for what, r in (("the existing report", old), ("the new run", new)):
        if r.get("mode") == "sim" or "measurements" not in r:
            raise ValueError(f"--merge: {what} is a simulator smoke pass, with no timings")
    gpu_old = old.get("environment", {}).get("gpu")
    gpu_new = new.get("environment", {}).get("gpu")
    if gpu_old != gpu_new:
        raise ValueError(f"--merge: the existing report was measured on {gpu_old}, the new "
                         f"run on {gpu_new}: ratios from two GPUs would sit in one table")
    if old.get("size") != new.get("size"):
        raise ValueError(f"--merge: sizes differ ({old.get('size')} vs {new.get('size')})")
    fresh = {k: dict(v) for k, v in new["measurements"].items() if k not in CEILING_CASES}
    if not fresh:
        raise ValueError(f"--merge: the new run has no measurements of {', '.join(only)}")
    stray = [k for k in fresh if not owned(k)]
    if stray:
        raise ValueError(f"--merge: the new run measured {stray}, not part of {only}")
    stamp = {"date": new["date"], "ceilings": dict(new.get("ceilings", {}))}
    out = {k: v for k, v in old.items() if k not in ("measurements", "ratios", "problems")}
    gone = {k for k in old["measurements"] if owned(k) and k not in CEILING_CASES}
    dead_ratios = {old["measurements"][k].get("ratio") for k in gone} - {None}
    meas: dict[str, Any] = {}
    for k, v in old["measurements"].items():
        if k in fresh:
            meas[k] = {**fresh[k], "remeasured": stamp}
        elif k not in gone:
            meas[k] = v
    for k, v in fresh.items():
        meas.setdefault(k, {**v, "remeasured": stamp})
    new_ratio_names = {v.get("ratio") for v in fresh.values()} - {None}
    for v in fresh.values():  # the further ratios and values each measurement feeds
        new_ratio_names |= {p[0] for p in v.get("more") or ()} | set(v.get("values") or {})
    dead_ratios |= new_ratio_names
    ratios_ = {k: v for k, v in old.get("ratios", {}).items() if k not in dead_ratios}
    ratios_.update({k: v for k, v in new.get("ratios", {}).items() if k in new_ratio_names})
    problems = {k: v for k, v in old.get("problems", {}).items() if k not in dead_ratios}
    problems.update({k: v for k, v in new.get("problems", {}).items()
                     if k in new_ratio_names})
    out["merges"] = list(old.get("merges", [])) + [{
        "date": new["date"], "command": command or new.get("command", ""), "only": list(only),
        "gpu": gpu_new, "ceilings": stamp["ceilings"], "measurements": sorted(fresh)}]
    out.update(measurements=meas, ratios=ratios_, problems=problems)
    return out
