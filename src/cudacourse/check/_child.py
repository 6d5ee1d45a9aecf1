"""The child process of the checks: rebuild a learner's kernel from its source,
then either compile it for a real sm_90 GPU (``compile``) or run a checker on it in Numba's
CUDA simulator (``replay``). Run by path, never imported as part of the package:

    python _child.py compile|replay  < request.json  > one JSON line after RESULT_MARK
    python _child.py serve  < one compile request a line  > one answer line per request

``serve`` is ``compile`` kept alive (``_compileserver.py``): the imports and the toolkit's
set-up, most of a compile's cost, are paid once per checking process, not once per kernel.

Why a child at all: Numba's simulator replaces ``numba.cuda``'s driver, compiler and
dispatcher modules in ``sys.modules`` for the whole process, so a simulator process cannot
also run the real compiler, and a GPU process cannot simulate. The child picks its mode
before anything imports ``numba.cuda``.

``compile`` needs no GPU and no driver: libNVVM, libdevice and ptxas come from NVIDIA's pip
wheels (``nvidia-nvvm``, ``nvidia-cuda-nvcc``), a fake H200 answers cudacourse's device probe,
and Numba is told where the toolkit is and that the current device is sm_90.
tools/offline_sm90.py uses :func:`setup_offline_sm90` from here for the same purpose.
"""

from __future__ import annotations

import glob
import json
import linecache
import os
import re
import subprocess
import sys
import tempfile
import traceback
import types

RESULT_MARK = "@@cudacourse-child-result@@"
_SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --- where the toolkit is -------------------------------------------------------------------

def find_toolkit() -> dict | str:
    """Paths of libNVVM, libdevice and ptxas (pip wheels first, then $CUDA_HOME), or why not."""
    roots: list[str] = []
    for entry in sys.path:
        roots += glob.glob(os.path.join(entry, "nvidia", "cu13"))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            roots.append(os.environ[var])
    tried = []
    for root in roots:
        nvvm = (glob.glob(os.path.join(root, "lib", "libnvvm.so*"))
                + glob.glob(os.path.join(root, "nvvm", "lib64", "libnvvm.so*"))
                + glob.glob(os.path.join(root, "bin", "nvvm64*.dll"))
                + glob.glob(os.path.join(root, "nvvm", "bin", "nvvm64*.dll")))
        libdevice = glob.glob(os.path.join(root, "nvvm", "libdevice", "libdevice*.bc"))
        ptxas = [p for p in (os.path.join(root, "bin", "ptxas"),
                             os.path.join(root, "bin", "ptxas.exe")) if os.path.exists(p)]
        if nvvm and libdevice and ptxas:
            return {"root": root, "nvvm": sorted(nvvm)[-1], "libdevice": libdevice[0],
                    "ptxas": ptxas[0], "lib": os.path.dirname(sorted(nvvm)[-1])}
        tried.append(root)
    if not tried:
        return ("the nvidia-nvvm and nvidia-cuda-nvcc wheels are not installed (pip install "
                "the versions pinned in pyproject.toml)")
    return f"no complete CUDA toolkit (libnvvm, libdevice, ptxas) under {', '.join(tried)}"


def setup_offline_sm90(tk: dict, src_dir: str = _SRC) -> None:
    """Make ``cudacourse.setup()`` choose GPU mode with a fake H200 and point Numba at ``tk``.

    Must run before anything imports ``numba.cuda`` or ``cudacourse``.
    """
    os.environ["CUDACOURSE_QUIET"] = "1"
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    os.environ["CUDACOURSE_DEVICE"] = "gpu"
    sys.path[:] = [src_dir] + [p for p in sys.path if p != src_dir]  # this package first
    # here, not at the top: the environment above must be set before cudacourse.runtime.device is
    # imported (the package's __init__ chooses nothing and imports no Numba)
    import cudacourse.runtime.device as dev

    dev.probe_gpu = lambda: (dev.GPUInfo("offline sm_90 compiler", (9, 0), 132, 2**37,
                                         (13, 0), 1), "")
    from collections import namedtuple

    from numba.cuda import cuda_paths as cp
    from numba.cuda import dispatcher as disp
    from numba.cuda.cudadrv import nvrtc as nv

    nv.get_supported_ccs = lambda: ((9, 0),)
    info = namedtuple("_I", "by info")
    inc = os.path.join(tk["root"], "include")
    cp.get_cuda_paths._cached_result = {
        "nvrtc": info("cudacourse", None), "nvvm": info("cudacourse", tk["nvvm"]),
        "libdevice": info("cudacourse", tk["libdevice"]),
        "cudalib_dir": info("cudacourse", tk["lib"]),
        "static_cudalib_dir": info("cudacourse", tk["lib"]),
        "include_dir": info("cudacourse", inc)}
    disp.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))


# --- rebuilding the learner's functions -----------------------------------------------------

def rebuild(bundle: dict) -> dict:
    """Execute a bundle from ``_source.bundle``; returns the namespace it defined.

    Constants and arrays first: a def evaluates its defaults when it runs."""
    import base64

    import numpy as np
    from numba import cuda

    ns: dict = {"__name__": "__learner__", "__builtins__": __builtins__}
    for stmt in bundle["prelude"]:
        exec(stmt, ns)  # noqa: S102 - imports and constants the learner's code refers to
    for name, blob in bundle.get("arrays", {}).items():
        ns[name] = np.frombuffer(base64.b64decode(blob["data"]), dtype=blob["dtype"]) \
            .reshape(blob["shape"]).copy()
    files: dict[str, list[str]] = {}
    for unit in bundle["units"]:
        lines = files.setdefault(unit["filename"], [])
        body = unit["source"].splitlines(keepends=True)
        start = unit["lineno"] - 1
        while len(lines) < start + len(body):
            lines.append("\n")
        lines[start:start + len(body)] = body
    for filename, lines in files.items():  # so inspect.getsource works on the rebuilt code
        if not linecache.getlines(filename):  # a notebook cell: no file on this machine
            linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)
    for unit in bundle["units"]:
        code = compile("\n" * (unit["lineno"] - 1) + unit["source"], unit["filename"], "exec")
        exec(code, ns)  # noqa: S102 - the learner's own function, rebuilt
        if unit["name"] not in ns:
            raise RuntimeError(f"the rebuilt source did not define {unit['name']}")
        fn = ns[unit["name"]]
        if unit["jit"] is not None:
            ns[unit["name"]] = cuda.jit(**_jit_keywords(unit["jit"]))(fn)
    for alias, target in bundle["aliases"].items():
        ns[alias] = ns[target]
    return ns


def _jit_keywords(opts: dict) -> dict:
    """The options this process's ``cuda.jit`` takes (the simulator's takes fewer)."""
    from numba.core import config

    if config.ENABLE_CUDASIM:
        return {k: v for k, v in opts.items() if k in ("device", "fastmath", "inline")}
    return dict(opts)


def argtypes(specs: list) -> tuple:
    import numpy as np
    from numba import types as nt
    from numba.np import numpy_support

    out = []
    for s in specs:
        if s[0] == "array":
            out.append(nt.Array(numpy_support.from_dtype(np.dtype(s[1])), s[2], s[3]))
        else:
            out.append(numpy_support.from_dtype(np.dtype(s[1])))
    return tuple(out)


# --- compile ----------------------------------------------------------------------------------

_PTXAS = {"registers": r"Used (\d+) registers", "stack": r"(\d+) bytes stack frame",
          "spill_stores": r"(\d+) bytes spill stores", "spill_loads": r"(\d+) bytes spill loads",
          "shared": r"(\d+) bytes smem", "barriers": r"used (\d+) barriers"}


def ptxas_resources(ptxas: str, ptx: str, maxreg: int | None = None) -> dict:
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [ptxas, "-v", "-arch=sm_90", src, "-o", os.path.join(d, "k.cubin")]
        if maxreg:
            cmd.insert(1, f"--maxrregcount={int(maxreg)}")
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    text = r.stderr + r.stdout
    if r.returncode:
        return {"error": "ptxas refused the kernel: " + text.strip()[-800:]}
    res = {k: int((re.findall(p, text) or ["0"])[0]) for k, p in _PTXAS.items()}
    res["local"] = res["stack"]  # local memory per thread: the stack frame (spills included)
    return res


_READY: list = []  # the toolkit this process was set up for (serve: once)


def _prepare(req: dict) -> None:
    tk = req["toolkit"]
    if _READY:
        if _READY[0] != tk:
            raise RuntimeError("a compile server serves one toolkit")
        return
    setup_offline_sm90(tk, req.get("src_dir", _SRC))
    import cudacourse

    cudacourse.setup()  # GPU mode, so the course's helpers compile too
    _READY.append(tk)


def do_compile(req: dict) -> dict:
    _prepare(req)
    tk = req["toolkit"]
    from numba import cuda

    ns = rebuild(req["bundle"])
    kern = ns[req["entry"]]
    out = []
    for spec in req["signatures"]:
        sig = argtypes(spec)
        try:
            opts = next((dict(u["jit"] or {}) for u in req["bundle"]["units"]
                         if u["name"] == req["entry"]), {})
            ptx, _ = cuda.compile_ptx(kern.py_func, sig, cc=(9, 0),
                                      fastmath=bool(opts.get("fastmath", False)),
                                      lineinfo=False)
        except Exception as exc:  # noqa: BLE001 - the compiler's refusal, reported in words
            out.append({"ok": False, "kind": type(exc).__name__, "error": str(exc)})
            continue
        res = ptxas_resources(tk["ptxas"], ptx, (opts.get("max_registers")))
        if "error" in res:
            out.append({"ok": False, "kind": "ptxas", "error": res["error"]})
        else:
            out.append({"ok": True, "resources": res})
            if req.get("ptx"):  # the text itself, for lessons that read it (cudacourse.runtime.asm)
                out[-1]["ptx"] = ptx
    return {"results": out}


# --- replay -----------------------------------------------------------------------------------

def do_replay(req: dict) -> dict:
    os.environ["CUDACOURSE_DEVICE"] = "sim"
    os.environ["CUDACOURSE_QUIET"] = "1"
    os.environ["CUDACOURSE_COMPILE_GATE"] = "0"  # the real launch already compiled it
    import importlib

    import cudacourse

    cudacourse.setup()  # simulator mode, warp intrinsics installed

    ns = rebuild(req["bundle"])
    subjects = [ns[name] for name in req["entries"]]
    mod_name, _, qual = req["checker"].partition(":")
    obj = importlib.import_module(mod_name)
    for part in qual.split("."):
        obj = getattr(obj, part)
    fn = getattr(obj, "__wrapped__", obj)  # the sim part itself, not its GPU dispatch
    from cudacourse.check._engine import CheckFailure

    try:
        fn(*subjects, **req["kwargs"])
    except CheckFailure as exc:
        return {"ok": False, "failure": exc.to_dict()}
    except Exception as exc:  # noqa: BLE001 - a checker bug or an unusual kernel
        return {"ok": False, "failure": {
            "message": f"{type(exc).__name__}: {exc}", "cause": "replay_error",
            "hint": "", "context": {"traceback": traceback.format_exc()[-1500:]}}}
    return {"ok": True}


def serve() -> None:
    """Answer compile requests, one JSON line each on stdin, until stdin closes (the parent
    ended, or asked for a fresh child). Each answer is one line after RESULT_MARK and the
    request's nonce, written to the stdout this process started with: what a learner's code
    prints goes to the same pipe, and the parent takes only the line carrying the nonce.
    What one request's rebuild put in ``linecache`` is removed after it, so a later kernel
    defined in a cell of the same name is read from its own source."""
    out = os.fdopen(os.dup(1), "w")
    if _SRC not in sys.path:
        sys.path.insert(0, _SRC)
    for line in sys.stdin:
        if not line.strip():
            continue
        known = set(linecache.cache)
        nonce = ""
        try:
            req = json.loads(line)
            nonce = req.pop("nonce", "")
            result = do_compile(req)
        except Exception as exc:  # noqa: BLE001 - the request failed; say how, serve on
            result = {"child_error": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc()[-3000:]}
        for name in set(linecache.cache) - known:
            linecache.cache.pop(name, None)
        out.write("\n" + RESULT_MARK + nonce + json.dumps(result) + "\n")
        out.flush()


def main() -> None:
    mode = sys.argv[1]
    if mode == "serve":
        serve()
        return
    req = json.loads(sys.stdin.read())
    if _SRC not in sys.path:
        sys.path.insert(0, _SRC)
    try:
        result = do_compile(req) if mode == "compile" else do_replay(req)
    except Exception as exc:  # noqa: BLE001 - the child itself failed; say how
        result = {"child_error": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc()[-3000:]}
    # The nonce makes the answer unforgeable by what the learner's code prints (the parent
    # takes the first line carrying it; an atexit handler printing later does not count).
    sys.stdout.write("\n" + RESULT_MARK + req.pop("nonce", "") + json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
