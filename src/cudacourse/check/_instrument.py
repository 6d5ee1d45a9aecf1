"""Native evidence: an instrumented build of the learner's kernel, run where the check runs.

The simulator sees every access because every access is a Python call; a GPU sees none. So
on a GPU the kernel is rebuilt from its source with the evidence written into it (an
``ast`` rewrite, plain Numba CUDA code, so it compiles for sm_90 and runs in the simulator
alike):

* every element load and store of a watched global array goes through a helper that checks
  the index against the array's shape (outside: the load returns the guard-zone sentinel,
  the store is dropped, and the thread, array, axis, index and line are recorded, as the
  simulator's watched views do), counts the access per thread, and counts the store per
  element with an atomic add;
* every shared-memory access updates a shadow entry in global memory, per block and slot:
  the last writer and the last reader, each with the barrier epoch of the accessing thread
  (the number of ``cuda.syncthreads()`` it has passed). Two threads touching one slot in one
  epoch, one of them writing, is a race; a slot read that no thread of the block ever
  stored is an unfilled read;
* every ``cuda.syncthreads()`` reached is recorded per thread, by line (a barrier that not
  every thread of the block reaches is found from those lists), and shuffles and atomics
  are counted;
* every ``while`` loop is bounded: a thread's ``while`` trips, all its loops together, are
  counted, and past :data:`LOOP_CAP` the first thread there records its block, its thread,
  the loop and the numbers its condition reads, and leaves the loop (``break``). A GPU
  kernel that never ends cannot be interrupted (the notebook hangs until its kernel is
  restarted), so an endless loop must end inside the build: the launch then ends, the
  check fails with cause ``endless_loop`` (:meth:`NativeObservation.run`), and the raw
  kernel never runs. ``for`` loops need no bound: Numba's ``for`` runs over a ``range`` or
  an array, both finite (Numba refuses a zero step).

The record is a :class:`NativeObservation`, an ``_observation.Observation`` whose fields are
filled from the device's shadow arrays after each launch, so the checkers' verdict code is
the same on both devices. What the rewrite cannot follow (an array passed to a function, a
view such as ``out.T``, a barrier inside a device function) makes :func:`plan` say why; the
checker then falls back to the simulator replay. Warp-level undefined behaviour (a shuffle
some lanes do not reach) is not visible here either; the replay keeps that part.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import linecache
import textwrap
import threading
from typing import Any, Iterator

from ..i18n import T
from . import _engine as E
from . import _compile  # which causes are compile refusals (COMPILE_CAUSES)
from . import _origin, _spy
from . import _observation as O  # the record filled here, as the simulator fills it

_np = E._np
OOB_RECORDS = 4096  # out-of-bounds accesses kept per launch (the first ones; as many as the
# simulator keeps, so that "k threads past the end" counts the same on both devices)
RACE_RECORDS = 16
UNFILLED_RECORDS = 64
BARRIER_LINES = 64  # barrier lines kept per thread, in the order reached
LOOP_CAP = 1 << 20  # while-loop trips per thread, all its while loops together, before the
# build calls the loop endless: a right answer's loops run log2(n) trips (a tree reduction)
# or n / threads (a grid stride) on a check's sizes, far below; a GPU runs 2**20 trips in
# seconds even with every access recorded (an estimate, about a microsecond a trip: the H200
# run of tests/test_loopcap.py's mutants times it). Read at each launch (tests lower it: the
# simulator runs ~4,400 threads/s), not compiled in, so one build serves any cap.
LOOP_NAMES = 4  # numbers of an endless loop's condition kept (its first names, sorted)
_CASTS = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
          "uint16", "uint32", "uint64", "int", "float", "abs", "min", "max", "round"}
_DIMS = {"threadIdx", "blockIdx", "blockDim", "gridDim"}
_SHFL = {"shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync"}
_WARP = _SHFL | {"syncwarp", "activemask", "ballot_sync", "all_sync", "any_sync", "eq_sync",
                 "match_any_sync", "match_all_sync", "lanemask_lt"}
_ARRAY_ATTRS = {"shape", "size", "ndim", "dtype"}
_STATE: dict = {"builds": {}, "lock": threading.Lock(), "session": None}


class NotInstrumentable(Exception):
    """The rewrite cannot follow this kernel; the message says what, in words."""


# --- static analysis ------------------------------------------------------------------------

def _source_of(py_func: Any) -> tuple[ast.FunctionDef, str]:
    try:
        src = textwrap.dedent(inspect.getsource(py_func))
    except (OSError, TypeError) as exc:
        raise NotInstrumentable(f"its source is not available ({exc})") from None
    tree = ast.parse(src)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    if fn is None:
        raise NotInstrumentable("its source holds no def")
    ast.increment_lineno(tree, py_func.__code__.co_firstlineno - 1)
    return fn, src


def _is_attr_call(node: ast.AST, names: set[str]) -> str:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in names:
        return node.func.attr
    return ""


def _atomic_op(node: ast.AST) -> str:
    """'add' for cuda.atomic.add(...) (any alias of cuda), else ''."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "atomic":
        return node.func.attr
    return ""


def _shared_alloc(node: ast.AST) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return isinstance(f, ast.Attribute) and f.attr == "array" and \
        isinstance(f.value, ast.Attribute) and f.value.attr == "shared"


def _uses_warp(fn: ast.FunctionDef) -> bool:
    return any(_is_attr_call(n, _WARP) for n in ast.walk(fn))


def _check_names(fn: ast.FunctionDef, arrays: set[str], what: str) -> None:
    """Every use of an observed array name must be an element access, a shape query or the
    array argument of an atomic; anything else (a view, an alias, a call) hides accesses."""
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(fn):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Name) and node.id in arrays):
            continue
        up = parents.get(id(node))
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            if isinstance(up, ast.Assign) and what == "shared" and _shared_alloc(up.value):
                continue
            raise NotInstrumentable(f"it assigns to the {what} array {node.id} (line "
                                    f"{node.lineno})")
        if isinstance(up, ast.Subscript) and up.value is node:
            idx = up.slice
            parts = idx.elts if isinstance(idx, ast.Tuple) else [idx]
            if any(isinstance(p, (ast.Slice, ast.Starred)) for p in parts):
                raise NotInstrumentable(f"it slices {node.id} (line {node.lineno})")
            continue
        if isinstance(up, ast.Attribute) and up.attr in _ARRAY_ATTRS:
            continue
        if isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id == "len":
            continue
        if isinstance(up, ast.Call) and _atomic_op(up) and up.args and up.args[0] is node:
            continue
        raise NotInstrumentable(f"it uses the {what} array {node.id} other than by element "
                                f"(line {node.lineno}): a view, an alias or a call")


def _called_device_functions(fn: ast.FunctionDef, glb: dict) -> list:
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            obj = glb.get(node.func.id)
            if obj is not None and hasattr(obj, "py_func"):
                out.append((node.func.id, obj))
    return out


def _has_while(text: str) -> bool:
    try:
        return any(isinstance(n, ast.While) for n in ast.walk(ast.parse(textwrap.dedent(text))))
    except SyntaxError:
        return True  # not readable: not followed either


def _numeric(e: ast.AST, ok: set[str], arrays: set[str]) -> bool:
    """Whether ``e`` is surely a number (int or float, not a bool, a tuple or an array), by
    its form alone: what an endless loop's record may store as a float64 without making the
    build fail to compile. ``ok``: the names known to hold numbers."""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
    if isinstance(e, ast.Name):
        return e.id in ok
    if isinstance(e, ast.BinOp):
        return _numeric(e.left, ok, arrays) and _numeric(e.right, ok, arrays)
    if isinstance(e, ast.UnaryOp):
        return not isinstance(e.op, ast.Not) and _numeric(e.operand, ok, arrays)
    if isinstance(e, ast.IfExp):
        return _numeric(e.body, ok, arrays) and _numeric(e.orelse, ok, arrays)
    if isinstance(e, ast.Subscript):  # an element of an observed array, or a size
        v = e.value
        return isinstance(v, ast.Name) and v.id in arrays or \
            isinstance(v, ast.Attribute) and v.attr == "shape"
    if isinstance(e, ast.Attribute):
        v = e.value
        return (e.attr in ("x", "y", "z") and isinstance(v, ast.Attribute) and v.attr in _DIMS
                or e.attr in ("laneid", "warpsize")
                or e.attr in ("size", "ndim") and isinstance(v, ast.Name) and v.id in arrays)
    if isinstance(e, ast.Call):
        f = e.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
            else ""
        if name in _CASTS:
            return bool(e.args) and all(_numeric(a, ok, arrays) for a in e.args)
        if name in _SHFL:
            return len(e.args) > 1 and _numeric(e.args[1], ok, arrays)
        if name in ("grid", "gridsize"):
            return len(e.args) == 1 and isinstance(e.args[0], ast.Constant) and \
                e.args[0].value == 1
        return bool(_atomic_op(e)) or isinstance(f, ast.Attribute) and \
            isinstance(f.value, ast.Name) and f.value.id == "math"
    return False


def _numeric_names(fn: ast.FunctionDef, seeds: set[str], arrays: set[str],
                   glb: dict | None = None) -> set[str]:
    """The kernel's names that surely hold numbers wherever they are bound: ``seeds`` (its
    scalar parameters) and the locals every binding of which is numeric (``_numeric``);
    the module's number constants (``glb``: TPB) count as numbers in those bindings, but are
    not kept (a constant is not what a loop's trips change, and the simulator's look at a
    stopped thread shows its locals only)."""
    binds: dict[str, list] = {n: [] for n in seeds}
    bad: set[str] = set()
    grid_call = ast.Constant(0)  # a number: an element of cuda.grid(k) / gridsize(k)
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    binds.setdefault(t.id, []).append(node.value)
                elif isinstance(t, (ast.Tuple, ast.List)):
                    whole = node.value
                    per = isinstance(whole, ast.Call) and isinstance(whole.func, ast.Attribute) \
                        and whole.func.attr in ("grid", "gridsize")
                    for el in t.elts:
                        if isinstance(el, ast.Name):
                            binds.setdefault(el.id, []).append(grid_call)
                            if not per:
                                bad.add(el.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            binds.setdefault(node.target.id, []).append(
                ast.BinOp(left=ast.Name(id=node.target.id, ctx=ast.Load()), op=node.op,
                          right=node.value))
        elif isinstance(node, ast.For):
            for el in ast.walk(node.target):
                if isinstance(el, ast.Name):
                    binds.setdefault(el.id, []).append(grid_call)
                    it = node.iter
                    if not (isinstance(node.target, ast.Name) and isinstance(it, ast.Call)
                            and isinstance(it.func, ast.Name) and it.func.id == "range"):
                        bad.add(el.id)
        elif isinstance(node, ast.NamedExpr):
            binds.setdefault(node.target.id, []).append(node.value)
    consts = {k for k, v in (glb or {}).items() if k not in binds and
              isinstance(v, (int, float, _np.integer, _np.floating)) and
              not isinstance(v, (bool, _np.bool_))}
    ok = {n for n in binds if n not in bad and n not in arrays}
    while True:  # the fixpoint: a name is numeric when all its bindings are, given the rest
        keep = {n for n in ok if all(v is not None and _numeric(v, ok | consts, arrays)
                                     for v in binds[n])}
        if keep == ok:
            return ok
        ok = keep


def plan(kernel: Any) -> str:
    """'' when :func:`build` can instrument ``kernel``, else why not (in words)."""
    try:
        _analyse(kernel)
    except NotInstrumentable as exc:
        return str(exc)
    return ""


def _analyse(kernel: Any) -> dict:
    py = getattr(kernel, "py_func", None)
    if py is None:
        raise NotInstrumentable("it is not a @cuda.jit kernel")
    fn, _ = _source_of(py)
    if any(isinstance(n, ast.Name) and n.id.startswith("__cc_") or
           isinstance(n, ast.arg) and n.arg.startswith("__cc_") for n in ast.walk(fn)):
        # the evidence lives in __cc_* names: a kernel that names them could forge it
        raise NotInstrumentable("it uses a name that starts with __cc_")
    if any(isinstance(n, (ast.FunctionDef, ast.Lambda, ast.AsyncFunctionDef))
           for n in ast.walk(fn) if n is not fn):
        raise NotInstrumentable("it defines a function inside the kernel")
    if fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs:
        raise NotInstrumentable("it takes *args or keyword-only parameters")
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    shared: dict[str, int] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and _shared_alloc(node):
            shared.setdefault("", 0)
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and _shared_alloc(node.value):
            if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
                raise NotInstrumentable(f"line {node.lineno} allocates shared memory other "
                                        "than as `name = cuda.shared.array(...)`")
            name = node.targets[0].id
            if name in shared:
                raise NotInstrumentable(f"it allocates the shared array {name} twice")
            shared[name] = node.lineno
    n_alloc = sum(1 for n in ast.walk(fn) if isinstance(n, ast.Call) and _shared_alloc(n))
    shared.pop("", None)
    if n_alloc != len(shared):
        raise NotInstrumentable("it allocates shared memory inside an expression")
    glb = dict(py.__globals__)
    if py.__closure__:
        glb.update(inspect.getclosurevars(py).nonlocals)
    for name, dev in _called_device_functions(fn, glb):
        try:
            text = inspect.getsource(dev.py_func)
        except (OSError, TypeError):
            text = ""
        if "syncthreads" in text or "shared" in text:
            raise NotInstrumentable(f"the device function {name} it calls uses barriers or "
                                    "shared memory")
        if "while" in text and _has_while(text):
            # its loop would run unbounded in the build (only the kernel's own are capped),
            # and a GPU kernel that never ends cannot be interrupted: the replay decides
            raise NotInstrumentable(f"the device function {name} it calls has a while loop")
    _check_names(fn, set(shared), "shared")
    return {"fn": fn, "params": params, "shared": shared, "globals": glb,
            "warp": _uses_warp(fn)}


# --- the rewrite ------------------------------------------------------------------------------

def _helpers_source(ranks: set[int]) -> str:
    """Device helpers for element access of rank r (generated: Numba has no *index)."""
    src = [f"""
@__cc_cuda.jit(device=True)
def __cc_rec7(rec, cap, v0, v1, v2, v3, v4, v5, v6):
    # one record of seven values (an access outside, a race): rec[0] counts every one,
    # the first cap are kept
    k = __cc_cuda.atomic.add(rec, 0, 1)
    if k < cap:
        b = 1 + k * 7
        rec[b] = v0
        rec[b + 1] = v1
        rec[b + 2] = v2
        rec[b + 3] = v3
        rec[b + 4] = v4
        rec[b + 5] = v5
        rec[b + 6] = v6

@__cc_cuda.jit(device=True)
def __cc_loop(rec, val, tid, site, v0, v1, v2, v3):
    # a thread past the loop cap: rec[0] counts them, the first keeps its thread, its loop
    # and the numbers its condition reads (their real part: any number fits a float64)
    if __cc_cuda.atomic.add(rec, 0, 1) == 0:
        rec[2] = tid
        rec[3] = site
        val[0] = v0.real
        val[1] = v1.real
        val[2] = v2.real
        val[3] = v3.real

@__cc_cuda.jit(device=True)
def __cc_bar(bar, tid, line):
    b = tid * {BARRIER_LINES + 1}
    n = bar[b]
    if n < {BARRIER_LINES}:
        bar[b + 1 + n] = line
    bar[b] = n + 1
"""]
    for r in sorted(ranks):
        ix = ", ".join(f"i{d}" for d in range(r))
        flat = "i0"
        for d in range(1, r):
            flat = f"({flat}) * a.shape[{d}] + i{d}"
        checks = "".join(f"""
    if i{d} < 0 or i{d} >= a.shape[{d}]:
        __cc_rec7(oob, {OOB_RECORDS}, tid, pid, {d}, i{d}, a.shape[{d}], line, WRITE)
        return RET""" for d in range(r))
        zero = ", ".join("0" for _ in range(r))
        src.append(f"""
@__cc_cuda.jit(device=True)
def __cc_ld{r}(a, {ix}, rd, fill, oob, tid, pid, line):{checks.replace('WRITE', '0').replace('RET', 'fill')}
    rd[tid] += 1
    return a[{ix}]

@__cc_cuda.jit(device=True)
def __cc_st{r}(a, {ix}, v, wr, ew, oob, tid, pid, line):{checks.replace('WRITE', '1').replace('RET', '')}
    a[{ix}] = v
    wr[tid] += 1
    __cc_cuda.atomic.add(ew, {flat}, 1)

@__cc_cuda.jit(device=True)
def __cc_at{r}(a, {ix}, rd, wr, ew, tid):
    rd[tid] += 1
    wr[tid] += 1
    __cc_cuda.atomic.add(ew, {flat}, 1)

@__cc_cuda.jit(device=True)
def __cc_sld{r}(a, {ix}, sw, sr, site, blk, tib, ep, line, shr, tid, race, unf, oob):{checks.replace('WRITE', '0').replace('RET', f'a[{zero}]').replace('pid,', '-1 - site,')}
    slot = {flat}
    j = blk * a.size + slot
    enc = ((ep + 1) << 40) | (line << 20) | (tib + 1)
    w = __cc_cuda.atomic.add(sw, j, 0)
    if w == 0:
        k = __cc_cuda.atomic.add(unf, 0, 1)
        if k < {UNFILLED_RECORDS}:
            unf[1 + 4 * k] = site
            unf[2 + 4 * k] = slot
            unf[3 + 4 * k] = blk
            unf[4 + 4 * k] = enc
    elif (w >> 40) == ep + 1 and (w & 0xFFFFF) != tib + 1:
        __cc_rec7(race, {RACE_RECORDS}, site, slot, blk, w, enc, 1, 0)
    old = __cc_cuda.atomic.exch(sr, j, enc)
    if (old >> 40) == ep + 1 and (old & 0xFFFFF) != tib + 1:
        __cc_cuda.atomic.exch(sr, j, old)  # keep a reader other than this one
    shr[tid] += 1
    return a[{ix}]

@__cc_cuda.jit(device=True)
def __cc_sst{r}(a, {ix}, v, sw, sr, site, blk, tib, ep, line, tid, race, oob):{checks.replace('WRITE', '1').replace('RET', '').replace('pid,', '-1 - site,')}
    slot = {flat}
    j = blk * a.size + slot
    enc = ((ep + 1) << 40) | (line << 20) | (tib + 1)
    old = __cc_cuda.atomic.exch(sw, j, enc)
    if (old >> 40) == ep + 1 and (old & 0xFFFFF) != tib + 1:
        __cc_rec7(race, {RACE_RECORDS}, site, slot, blk, old, enc, 1, 1)
    rd = __cc_cuda.atomic.add(sr, j, 0)
    if (rd >> 40) == ep + 1 and (rd & 0xFFFFF) != tib + 1:
        __cc_rec7(race, {RACE_RECORDS}, site, slot, blk, rd, enc, 0, 1)
    a[{ix}] = v
""")
    return "\n".join(src)


def _index_parts(sub: ast.Subscript) -> list[ast.expr]:
    idx = sub.slice
    return list(idx.elts) if isinstance(idx, ast.Tuple) else [idx]


def _name(id_: str) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Load())


def _call(fn: str, args: list) -> ast.Call:
    return ast.Call(func=_name(fn), args=args, keywords=[])


class _Rewrite(ast.NodeTransformer):
    def __init__(self, watched: dict[str, int], ranks: dict[str, int],
                 shared: dict[str, int], shared_rank: dict[str, int]) -> None:
        self.watched, self.ranks = watched, ranks
        self.shared, self.shared_rank = shared, shared_rank
        self.site = {name: i for i, name in enumerate(shared)}
        self.used_ranks: set[int] = set()
        self.numbers: set[str] = set()  # names that surely hold numbers (_numeric_names)
        self.loops: list[tuple[int, str, tuple]] = []  # per while loop: line, test, names

    def _rank(self, name: str, parts: list, line: int) -> int:
        r = self.ranks[name] if name in self.ranks else self.shared_rank[name]
        if len(parts) != r:
            raise NotInstrumentable(f"line {line} indexes {name} ({r} dimensions) with "
                                    f"{len(parts)} indices")
        self.used_ranks.add(r)
        return r

    def _load(self, sub: ast.Subscript) -> ast.expr:
        name = sub.value.id
        parts = [self.visit(p) for p in _index_parts(sub)]
        r = self._rank(name, parts, sub.lineno)
        line = ast.Constant(sub.lineno)
        if name in self.watched:
            k = self.watched[name]
            return _call(f"__cc_ld{r}", [_name(name), *parts, _name(f"__cc_r{k}"),
                                         _name(f"__cc_f{k}"), _name("__cc_oobrec"),
                                         _name("__cc_tid"), ast.Constant(k), line])
        s = self.site[name]
        return _call(f"__cc_sld{r}", [_name(name), *parts, _name(f"__cc_sw{s}"),
                                      _name(f"__cc_sr{s}"), ast.Constant(s), _name("__cc_blk"),
                                      _name("__cc_tib"), _name("__cc_ep"), line,
                                      _name("__cc_shr"), _name("__cc_tid"),
                                      _name("__cc_racerec"), _name("__cc_unf"),
                                      _name("__cc_oobrec")])

    def _store(self, sub: ast.Subscript, value: ast.expr, line: int) -> ast.stmt:
        name = sub.value.id
        parts = [self.visit(p) for p in _index_parts(sub)]
        r = self._rank(name, parts, line)
        if name in self.watched:
            k = self.watched[name]
            call = _call(f"__cc_st{r}", [_name(name), *parts, value, _name(f"__cc_w{k}"),
                                         _name(f"__cc_e{k}"), _name("__cc_oobrec"),
                                         _name("__cc_tid"), ast.Constant(k),
                                         ast.Constant(line)])
        else:
            s = self.site[name]
            call = _call(f"__cc_sst{r}", [_name(name), *parts, value, _name(f"__cc_sw{s}"),
                                          _name(f"__cc_sr{s}"), ast.Constant(s),
                                          _name("__cc_blk"), _name("__cc_tib"),
                                          _name("__cc_ep"), ast.Constant(line),
                                          _name("__cc_tid"), _name("__cc_racerec"),
                                          _name("__cc_oobrec")])
        return ast.Expr(call)

    def _observed(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
            (node.value.id in self.watched or node.value.id in self.shared)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if self._observed(node) and isinstance(node.ctx, ast.Load):
            return self._load(node)
        return self.generic_visit(node)

    def _counters(self, stmt: ast.stmt) -> list[ast.stmt]:
        """Statements counting the shuffles and atomics that ``stmt`` itself makes."""
        out: list[ast.stmt] = []
        todo = [stmt]
        while todo:
            node = todo.pop()
            for child in ast.iter_child_nodes(node):
                if not isinstance(child, ast.stmt):
                    todo.append(child)
            if _is_attr_call(node, _SHFL):
                out.append(ast.parse("__cc_shf[__cc_tid] += 1").body[0])
            op = _atomic_op(node)
            if op:
                out.append(ast.parse("__cc_cuda.atomic.add(__cc_atm, __cc_blk, 1)").body[0])
                arr = node.args[0] if node.args else None
                if isinstance(arr, ast.Name) and arr.id in self.watched and len(node.args) > 1:
                    k = self.watched[arr.id]
                    idx = node.args[1]
                    parts = list(idx.elts) if isinstance(idx, ast.Tuple) else [idx]
                    r = self._rank(arr.id, parts, node.lineno)
                    out.append(ast.Expr(_call(f"__cc_at{r}", [
                        _name(arr.id), *parts, _name(f"__cc_r{k}"), _name(f"__cc_w{k}"),
                        _name(f"__cc_e{k}"), _name("__cc_tid")])))
        return out

    def visit_Assign(self, node: ast.Assign) -> Any:
        pre = self._counters(node)
        value = self.visit(node.value)
        if len(node.targets) == 1 and self._observed(node.targets[0]):
            return pre + [self._store(node.targets[0], value, node.lineno)]
        if any(self._observed(t) for t in node.targets) or any(
                isinstance(t, (ast.Tuple, ast.List)) and any(self._observed(e) for e in t.elts)
                for t in node.targets):
            raise NotInstrumentable(f"line {node.lineno} stores to an array in a multiple "
                                    "assignment")
        node.value = value
        node.targets = [self.visit(t) for t in node.targets]
        return pre + [node]

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        pre = self._counters(node)
        if self._observed(node.target):
            load = ast.Subscript(value=node.target.value, slice=node.target.slice,
                                 ctx=ast.Load(), lineno=node.lineno)
            value = ast.BinOp(left=self._load(load), op=node.op, right=self.visit(node.value))
            store = ast.Subscript(value=node.target.value, slice=node.target.slice,
                                  ctx=ast.Store(), lineno=node.lineno)
            return pre + [self._store(store, value, node.lineno)]
        self.generic_visit(node)
        return pre + [node]

    def visit_Expr(self, node: ast.Expr) -> Any:
        pre = self._counters(node)
        if isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute) \
                and node.value.func.attr == "syncthreads":
            rec = ast.parse(f"__cc_bar(__cc_barrec, __cc_tid, {node.lineno})\n"
                            "__cc_ep += 1").body
            return pre + [node] + rec
        self.generic_visit(node)
        return pre + [node]

    def visit_While(self, node: ast.While) -> Any:
        """The loop, bounded: each trip counts against the thread's ``LOOP_CAP`` first
        (before the body, so a ``continue`` counts too); past it the thread records the loop
        and leaves it. The trips of all the thread's loops add up, so a capped inner loop
        inside an outer one does not start over ``LOOP_CAP`` times."""
        site = len(self.loops)
        names = tuple(sorted({n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)
                              and n.id in self.numbers}))[:LOOP_NAMES]
        self.loops.append((node.lineno, ast.unparse(node.test), names))
        self.generic_visit(node)
        vals = ", ".join(list(names) + ["0"] * (LOOP_NAMES - len(names)))
        guard = ast.parse("__cc_trips += 1\n"
                          "if __cc_trips > __cc_cap:\n"
                          f"    __cc_loop(__cc_looprec, __cc_loopval, __cc_tid, {site}, {vals})\n"
                          "    break").body
        for g in guard:
            ast.copy_location(g, node)
        node.body = guard + node.body
        return node

    def generic_stmt(self, node: ast.stmt) -> Any:
        pre = self._counters(node) if not isinstance(node, (ast.If, ast.For, ast.While)) \
            else []
        self.generic_visit(node)
        return pre + [node] if pre else node

    visit_Return = generic_stmt


_PRELUDE = """
__cc_tib = (__cc_cuda.threadIdx.z * __cc_cuda.blockDim.y + __cc_cuda.threadIdx.y) \\
    * __cc_cuda.blockDim.x + __cc_cuda.threadIdx.x
__cc_blk = (__cc_cuda.blockIdx.z * __cc_cuda.gridDim.y + __cc_cuda.blockIdx.y) \\
    * __cc_cuda.gridDim.x + __cc_cuda.blockIdx.x
__cc_tid = __cc_blk * (__cc_cuda.blockDim.x * __cc_cuda.blockDim.y * __cc_cuda.blockDim.z) \\
    + __cc_tib
__cc_ep = 0
__cc_trips = 0
__cc_cap = __cc_looprec[1]
"""


def _shared_sizes(info: dict) -> tuple[dict, dict, dict]:
    """Slots and rank of each shared allocation, from its shape (constants of the kernel)."""
    sizes, ranks, shapes = {}, {}, {}
    for node in ast.walk(info["fn"]):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and _shared_alloc(node.value):
            name = node.targets[0].id
            shape_node = node.value.args[0] if node.value.args else next(
                (k.value for k in node.value.keywords if k.arg == "shape"), None)
            try:
                shape = eval(compile(ast.Expression(shape_node), "<shape>", "eval"),  # noqa: S307
                             dict(info["globals"]))
            except Exception as exc:  # noqa: BLE001 - a shape that is not a constant here
                raise NotInstrumentable(f"the shape of the shared array {name} is not a "
                                        f"constant ({exc})") from None
            shape = (shape,) if isinstance(shape, (int, _np.integer)) else tuple(shape)
            sizes[name] = int(_np.prod(shape))
            ranks[name] = len(shape)
            shapes[name] = tuple(int(v) for v in shape)
    return sizes, ranks, shapes


def build(kernel: Any, watched: tuple[int, ...], ranks: tuple[int, ...],
          scalars: tuple[int, ...] = ()) -> dict:
    """The instrumented kernel for watched parameter positions ``watched`` of ranks
    ``ranks`` (``scalars``: the positions given numbers, whose values an endless loop's record
    may keep), cached: {"kernel", "shared" (name -> slots), "loops", ...}."""
    key = (id(getattr(kernel, "py_func", kernel)), watched, ranks, scalars)
    with _STATE["lock"]:
        hit = _STATE["builds"].get(key)
    if hit is not None and hit["py"] is getattr(kernel, "py_func", None):
        return hit
    info = _analyse(kernel)
    params = info["params"]
    names = {params[i]: k for k, i in enumerate(watched)}
    _check_names(info["fn"], set(names), "global")
    sizes, shared_rank, shapes = _shared_sizes(info)
    fn = info["fn"]
    rw = _Rewrite(names, {params[i]: r for i, r in zip(watched, ranks)}, info["shared"],
                  shared_rank)
    rw.numbers = _numeric_names(fn, {params[i] for i in scalars if i < len(params)},
                                set(names) | set(info["shared"]), info["globals"])
    body = fn.body
    doc = body[:1] if body and isinstance(body[0], ast.Expr) and \
        isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str) else []
    new_body: list[ast.stmt] = ast.parse(_PRELUDE).body
    for stmt in body[len(doc):]:
        out = rw.visit(stmt)
        new_body += out if isinstance(out, list) else [out]
    extra = ["__cc_oobrec", "__cc_barrec", "__cc_shr", "__cc_shf", "__cc_atm",
             "__cc_racerec", "__cc_unf", "__cc_looprec", "__cc_loopval"]
    for k in range(len(watched)):
        extra += [f"__cc_r{k}", f"__cc_w{k}", f"__cc_e{k}", f"__cc_f{k}"]
    for s in range(len(info["shared"])):
        extra += [f"__cc_sw{s}", f"__cc_sr{s}"]
    new = ast.FunctionDef(
        name="__cc_kernel", args=ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=a) for a in params + extra], vararg=None,
            kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=doc + new_body, decorator_list=[], returns=None, type_params=[])
    mod = ast.Module(body=[new], type_ignores=[])
    ast.fix_missing_locations(mod)
    from numba import cuda

    ns = dict(info["globals"])
    ns["__cc_cuda"] = cuda
    text = _helpers_source(rw.used_ranks or {1}) + "\n\n" + ast.unparse(mod) + "\n"
    # Registered like a notebook cell, so that the compile gate can rebuild it from source
    # and compile it for sm_90 offline (tests), and a traceback shows the rewritten line.
    with _STATE["lock"]:
        _STATE["count"] = _STATE.get("count", 0) + 1
        unit = f"<cudacourse-instrumented-{_STATE['count']}>"
    linecache.cache[unit] = (len(text), None, text.splitlines(keepends=True), unit)
    exec(compile(text, unit, "exec"), ns)  # noqa: S102 - the learner's kernel, rewritten
    filename = inspect.getsourcefile(kernel.py_func) or "<kernel>"
    opts = {k: v for k, v in (_jit_options(kernel)).items() if k in ("fastmath",)}
    jitted = cuda.jit(**opts)(ns["__cc_kernel"])
    jitted.__cc_instrumented__ = True  # the compile gate checks the learner's kernel instead
    with _STATE["lock"]:  # by identity: an attribute a learner's kernel could carry too
        _STATE.setdefault("built", set()).add(id(jitted))
    built = {"kernel": jitted, "py": kernel.py_func,
             "shared": {name: sizes[name] for name in info["shared"]},
             "shared_lines": dict(info["shared"]), "filename": filename,
             "shared_shapes": {name: shapes[name] for name in info["shared"]},
             "source": text, "unit": unit,
             "loops": [(line, _loop_header(filename, line, test), names)
                       for line, test, names in rw.loops]}
    with _STATE["lock"]:
        _STATE["builds"][key] = built
    return built


def _loop_header(filename: str, line: int, test: str) -> str:
    """The loop's first line as the learner wrote it (as ``_budget`` quotes it), else its
    condition as the rewrite read it."""
    text = linecache.getline(filename, line).strip()
    return text if text.startswith("while") else f"while {test}:"


def is_build(kernel: Any) -> bool:
    """Whether ``kernel`` is one of this module's instrumented builds (kept alive in the
    cache of builds, so an id is never reused for another kernel)."""
    return id(kernel) in _STATE.get("built", ())


def _jit_options(kernel: Any) -> dict:
    from . import _source

    return _source.jit_options(kernel) or {}


# --- the observation ---------------------------------------------------------------------------

def _keys(tids: Any, grid: tuple, block: tuple) -> list[tuple]:
    """(block, thread) keys, as the simulator's observation names threads."""
    g = tuple(grid) + (1,) * (3 - len(grid))
    b = tuple(block) + (1,) * (3 - len(block))
    per = b[0] * b[1] * b[2]
    out = []
    for t in tids:
        blk, tib = divmod(int(t), per)
        bz, rem = divmod(blk, g[0] * g[1])
        by, bx = divmod(rem, g[0])
        tz, rem = divmod(tib, b[0] * b[1])
        ty, tx = divmod(rem, b[0])
        out.append(((bx, by, bz), (tx, ty, tz)))
    return out


def _number(v: float) -> str:
    """A recorded number as the simulator's look prints it: a whole number without '.0'
    (the record keeps every number as a float64)."""
    return str(int(v)) if float(v).is_integer() and abs(v) < 2 ** 53 else repr(float(v))


class NativeObservation(O.Observation):
    """An Observation filled from an instrumented build's shadow arrays (any device)."""

    native = True

    def __init__(self) -> None:
        super().__init__(True)
        self._watched: dict[int, tuple[str, Any]] = {}
        self.incomplete = ""  # why the last launch could not be observed ('' when it was)
        # the first thread past LOOP_CAP while-loop trips, when one was: {"thread",
        # "line", "code", "values", "trips" (the cap), "hits" (times a thread met the cap,
        # once per loop it was in)} (the launch then fails endless_loop)
        self.endless: dict | None = None

    def watch(self, view: Any, name: str) -> Any:
        log = O.ArrayLog(name, int(view.size))
        log.element_writes = O._zeros(int(view.size), dtype=_np.int64)
        self.arrays[name] = log
        self._watched[id(view)] = (name, view)
        return view

    def run(self, kernel: Any, grid: Any, block: Any, *args: Any, name: str = "kernel",
            shared: int = 0, strict: bool = False) -> None:
        """Launch the instrumented build of ``kernel`` (``E.launch``'s checks and
        diagnoses), then fill this observation from what it recorded. ``strict``
        (``_preflight``): never launch the learner's own kernel here; a kernel the rewrite
        cannot follow raises :class:`NotInstrumentable`, a failed run keeps the accesses
        outside that it recorded (``oob``) before raising."""
        __tracebackhide__ = True
        from numba import cuda

        g, b = E.validate_launch(grid, block)
        watched = tuple(i for i, a in enumerate(args) if id(a) in self._watched)
        ranks = tuple(int(args[i].ndim) for i in watched)
        scalars = tuple(i for i, a in enumerate(args)
                        if isinstance(a, (int, float, _np.integer, _np.floating))
                        and not isinstance(a, (bool, _np.bool_)))
        try:
            built = build(kernel, watched, ranks, scalars)
        except NotInstrumentable as exc:
            if strict:
                raise
            self._give_up(str(exc))
            E.launch(kernel, grid, block, *args, name=name)
            return
        nthreads = int(_np.prod(g)) * int(_np.prod(b))
        nblocks = int(_np.prod(g))
        i32, i64 = _np.int32, _np.int64
        dev = {"oob": cuda.to_device(_np.zeros(1 + 7 * OOB_RECORDS, i64)),
               "bar": cuda.to_device(_np.zeros(nthreads * (BARRIER_LINES + 1), i32)),
               "shr": cuda.to_device(_np.zeros(nthreads, i32)),
               "shf": cuda.to_device(_np.zeros(nthreads, i32)),
               "atm": cuda.to_device(_np.zeros(nblocks, i32)),
               "race": cuda.to_device(_np.zeros(1 + 7 * RACE_RECORDS, i64)),
               "unf": cuda.to_device(_np.zeros(1 + 4 * UNFILLED_RECORDS, i64)),
               # [threads past the cap, the cap, first one's thread, its loop]
               "loop": cuda.to_device(_np.array([0, int(LOOP_CAP), 0, 0], i64)),
               "loopval": cuda.to_device(_np.zeros(LOOP_NAMES, _np.float64))}
        extra = [dev[k] for k in ("oob", "bar", "shr", "shf", "atm", "race", "unf", "loop",
                                  "loopval")]
        per_array = []
        for i in watched:
            a = args[i]
            rd = cuda.to_device(_np.zeros(nthreads, i32))
            wr = cuda.to_device(_np.zeros(nthreads, i32))
            ew = cuda.to_device(_np.zeros(int(a.size), i32))
            dt = _np.dtype(a.dtype)
            fill = E.fitted(E.INPUT_SENTINEL, dt) if dt.kind == "f" else dt.type(0)
            extra += [rd, wr, ew, fill]
            per_array.append((self._watched[id(a)][0], rd, wr, ew))
        shadows = []
        for sname, slots in built["shared"].items():
            sw = cuda.to_device(_np.zeros(nblocks * slots, i64))
            sr = cuda.to_device(_np.zeros(nblocks * slots, i64))
            extra += [sw, sr]
            shadows.append((sname, slots, sw, sr))
        E.compile_gate(kernel, args, name)  # simulator: what sm_90 refuses, said of the kernel
        try:
            E.launch(built["kernel"], grid, block, *args, *extra, name=name, shared=shared)
        except E.CheckFailure as exc:
            if strict:
                if exc.cause in _compile.COMPILE_CAUSES:  # the rewrite's, not the learner's
                    raise NotInstrumentable(f"its instrumented build did not compile "
                                            f"({exc.message})") from None
                self._collect_oob(g, b, dev, per_array, built)
                raise
            if exc.cause in _compile.COMPILE_CAUSES:
                # Say what the learner's own kernel does wrong, not the rewrite: compile it.
                E.launch(kernel, grid, block, *args, name=name)
                self._give_up(f"its instrumented build did not compile ({exc.message})")
                return
            self._noted(kernel, strict)
            raise
        self._shared_shapes = built["shared_shapes"]
        self._collect(g, b, dev, per_array, shadows, built)
        self._noted(kernel, strict)
        if not self.oob:  # an access outside comes first, as in the simulator (it stops there)
            self._endless(g, b, dev, built, kernel, name, strict)

    def _endless(self, g: tuple, b: tuple, dev: dict, built: dict, kernel: Any, name: str,
                 strict: bool) -> None:
        """Fail ``endless_loop`` when a thread went past ``LOOP_CAP`` while-loop trips: the
        build left the loop so that the launch could end; the learner's kernel would not."""
        __tracebackhide__ = True
        rec = dev["loop"].copy_to_host()
        if int(rec[0]) == 0:
            return
        vals = dev["loopval"].copy_to_host()
        line, code, names = built["loops"][int(rec[3])]
        (bx, by, bz), (tx, ty, tz) = _keys([int(rec[2])], g, b)[0]
        shown = ", ".join(f"{n} = {_number(v)}" for n, v in zip(names, vals))
        self.endless = {"thread": ((bx, by, bz), (tx, ty, tz)), "line": line, "code": code,
                        "values": shown, "trips": int(rec[1]), "hits": int(rec[0])}
        if not strict and _spy.noting() and not _origin.package_origin(
                getattr(kernel, "py_func", kernel)):
            _spy.note("refused", getattr(getattr(kernel, "py_func", kernel), "__name__",
                                         "kernel"))
        who = T("thread ({tid_x}, {tid_y}, {tid_z}) of block ({bid_x}, {bid_y}, {bid_z})",
                tid_x=tx, tid_y=ty, tid_z=tz, bid_x=bx, bid_y=by, bid_z=bz)
        stopped = T("the check stopped it there, so that the launch could end: on a GPU a "
                    "kernel that never ends cannot be interrupted, and your kernel itself did "
                    "not run. Check how the loop's variable moves towards the end.")
        if shown:
            msg = T("the loop at line {line} (`{code}`) never ends: {who} went round it "
                    "{trips} times, far more than this exercise needs, and the numbers its "
                    "condition reads were then {values}, so its condition stays true; "
                    "{stopped}", line=line, code=code, who=who, trips=int(rec[1]),
                    values=shown, stopped=stopped)
        else:
            msg = T("the loop at line {line} (`{code}`) never ends: {who} went round it "
                    "{trips} times, far more than this exercise needs, and its condition was "
                    "still true; {stopped}", line=line, code=code, who=who, trips=int(rec[1]),
                    stopped=stopped)
        E.fail("endless_loop", msg, {"grid": E.launch_dims(g), "block": E.launch_dims(b)})

    def _noted(self, kernel: Any, strict: bool) -> None:
        """A checker's launch (not a launch's first run, which notes itself): the
        instrumented build was the launch, and the learner's own kernel never ran
        (``_spy.spying``: "instrumented", then "refused" when it went outside)."""
        if strict or not _spy.noting():
            return
        py = getattr(kernel, "py_func", kernel)
        if _origin.package_origin(py):  # the course's own kernel: not the learner's
            return
        name = getattr(py, "__name__", "kernel")
        _spy.note("instrumented", name)
        if self.oob:
            _spy.note("refused", name)

    def _give_up(self, why: str) -> None:
        self.incomplete = why
        self.live = False

    def _collect(self, g: tuple, b: tuple, dev: dict, per_array: list, shadows: list,
                 built: dict) -> None:
        for name, rd, wr, ew in per_array:
            log = self.arrays[name]
            for arr, into in ((rd.copy_to_host(), log.reads), (wr.copy_to_host(), log.writes)):
                nz = E._flatnonzero(arr)
                for key, t in zip(_keys(nz, g, b), nz):
                    into[key] += int(arr[t])
            log.element_writes = log.element_writes + ew.copy_to_host().astype(_np.int64)
        shared_names = {i: T("the shared array allocated at line {site}",
                               site=built['shared_lines'][s])
                        for i, (s, *_rest) in enumerate(shadows)}
        self._collect_oob(g, b, dev, per_array, built)
        per = int(_np.prod(b))
        for key, (counts, into) in zip(("shr", "shf"), (
                (dev["shr"].copy_to_host(), self.shared_reads),
                (dev["shf"].copy_to_host(), self.shuffles))):
            nz = E._flatnonzero(counts)
            for k, t in zip(_keys(nz, g, b), nz):
                into[k] += int(counts[t])
        atm = dev["atm"].copy_to_host()
        for blk in E._flatnonzero(atm):
            self.atomics[_keys([int(blk) * per], g, b)[0][0]] += int(atm[blk])
        self._races(dev["race"].copy_to_host(), shadows, shared_names, g, b)
        self._unfilled(dev["unf"].copy_to_host(), shadows, shared_names, g, b)
        bar = dev["bar"].copy_to_host().reshape(-1, BARRIER_LINES + 1)
        for t in E._flatnonzero(bar[:, 0]):
            n = int(bar[t, 0])
            lines = [int(v) for v in bar[t, 1:1 + min(n, BARRIER_LINES)]]
            lines += lines[-1:] * (n - len(lines))
            self.barriers[_keys([t], g, b)[0]] = lines
            for ln in lines[:1]:
                self.barrier_file.setdefault(ln, built["filename"])
        for ln in {v for ls in self.barriers.values() for v in ls}:
            self.barrier_file.setdefault(ln, built["filename"])
        gx = tuple(g) + (1,) * (3 - len(g))
        bx = tuple(b) + (1,) * (3 - len(b))
        for blk in _np.ndindex(gx[2], gx[1], gx[0]):
            self._end_block((blk[2], blk[1], blk[0]), bx)

    def _collect_oob(self, g: tuple, b: tuple, dev: dict, per_array: list,
                     built: dict) -> None:
        """The accesses outside an array, as the simulator records them: a global array by
        its watched name, a shared one by its name with (declaring line, declared shape)."""
        names = {k: name for k, (name, *_rest) in enumerate(per_array)}
        sites = list(built["shared"])
        oob = dev["oob"].copy_to_host()
        for k in range(min(int(oob[0]), OOB_RECORDS)):
            tid, pid, axis, idx, size, line, write = (int(v) for v in oob[1 + 7 * k:8 + 7 * k])
            decl = None
            if pid >= 0:
                arr = names.get(pid, "")
            elif -1 - pid < len(sites):
                arr = sites[-1 - pid]
                decl = (built["shared_lines"][arr], built["shared_shapes"][arr])
            else:
                arr = T("shared memory")
            self.oob.append(O.OutOfBounds(_keys([tid], g, b)[0], arr, axis, idx, size, line,
                                          bool(write), decl))

    def _thread_of(self, enc: int, blk: int, g: tuple, b: tuple) -> tuple[tuple, int]:
        tib = (enc & 0xFFFFF) - 1
        line = (enc >> 20) & 0xFFFFF
        return _keys([blk * int(_np.prod(b)) + tib], g, b)[0], line

    def _races(self, rec: Any, shadows: list, names: dict, g: tuple, b: tuple) -> None:
        shapes = {i: s for i, s in enumerate(shadows)}
        for k in range(min(int(rec[0]), RACE_RECORDS)):
            site, slot, blk, first, second, fw, sw = (int(v) for v in rec[1 + 7 * k:8 + 7 * k])
            t1, l1 = self._thread_of(first, blk, g, b)
            t2, l2 = self._thread_of(second, blk, g, b)
            epoch = (second >> 40) - 1
            between = (T("before the first cuda.syncthreads()") if epoch == 0 else
                       T("between the block's barriers number {epoch} and {epoch_plus_1}",
                         epoch=epoch, epoch_plus_1=epoch + 1))
            shape = self._shape(shapes[site][0])
            idx = tuple(int(i) for i in _np.unravel_index(slot, shape))
            self.races.append(O.Race(names[site], idx, (t1, "wrote" if fw else "read", l1),
                                     (t2, "wrote" if sw else "read", l2), between))

    def _shape(self, name: str) -> tuple:
        return self._shared_shapes[name]

    def _unfilled(self, rec: Any, shadows: list, names: dict, g: tuple, b: tuple) -> None:
        finals = {i: sh[2].copy_to_host() for i, sh in enumerate(shadows)}
        for k in range(min(int(rec[0]), UNFILLED_RECORDS)):
            site, slot, blk, enc = (int(v) for v in rec[1 + 4 * k:5 + 4 * k])
            slots = shadows[site][1]
            if finals[site][blk * slots + slot] != 0 or len(self.unfilled) >= 8:
                continue
            who, line = self._thread_of(enc, blk, g, b)
            idx = tuple(int(i) for i in _np.unravel_index(slot, self._shape(shadows[site][0])))
            self.unfilled.append((names[site], idx, who, line))
        # per block, the tile's cells never stored and those of them read: exact, from the
        # shadows (the records above stop at UNFILLED_RECORDS), as the simulator counts them
        per = int(_np.prod(b))
        for site, (_name_, slots, _sw, sr) in enumerate(shadows):
            stored = finals[site].reshape(-1, slots) != 0
            read_never = (sr.copy_to_host().reshape(-1, slots) != 0) & ~stored
            for blk in _np.flatnonzero(read_never.any(axis=1)):
                if len(self.fill) >= 64:
                    break
                block = _keys([int(blk) * per], g, b)[0][0]
                self.fill.append(O.Fill(names[site], tuple(block), int(stored[blk].sum()),
                                        int(slots), int(read_never[blk].sum())))


# --- when the checkers use it -------------------------------------------------------------------

class Session:
    """One checker's use of native evidence for one kernel (see :func:`session`)."""

    def __init__(self, kernel: Any, active: bool, why: str, warp: bool) -> None:
        self.kernel, self.active, self.why, self.warp = kernel, active, why, warp
        self.observations: list[NativeObservation] = []

    @property
    def gave_up(self) -> str:
        """Why a launch of this session could not be observed ('' when all were)."""
        return next((o.incomplete for o in self.observations if o.incomplete), "")


def enabled() -> bool:
    """Native evidence where the check runs: on a GPU, or in the simulator when
    CUDACOURSE_NATIVE=1 (the tests: the same rewrite, run by the simulator)."""
    import os

    if not E.simulator():
        return os.environ.get("CUDACOURSE_NATIVE", "1") != "0"
    return os.environ.get("CUDACOURSE_NATIVE", "0") == "1"


@contextlib.contextmanager
def session(kernel: Any) -> Iterator[Session]:
    """While active, ``_observe.observing()`` yields a :class:`NativeObservation`."""
    why = "" if enabled() else "off here"
    info = None
    if not why:
        try:
            info = _analyse(kernel)
        except NotInstrumentable as exc:
            why = str(exc)
    s = Session(kernel, not why, why, bool(info and info["warp"]))
    old = _STATE["session"]
    _STATE["session"] = s if s.active else None
    try:
        yield s
    finally:
        _STATE["session"] = old


def active() -> bool:
    """Whether a native-evidence session is on (``observing()`` then observes natively)."""
    return _STATE["session"] is not None


def observation() -> "NativeObservation | None":
    """The observation ``_observe.observing()`` hands out: during a session, the session's;
    outside one, where native evidence is on (a GPU), one of its own, so a checker that
    observes its launches without ``kernel_cases`` (heat_step, lbm_step, block_sum...) gets
    the same record on a GPU as in the simulator (on the H200, 2026-12-05, such checkers saw
    no record at all, and a tile never loaded was "a factor of 0" there, "cells no thread
    loaded" in the simulator); else None."""
    s = _STATE["session"]
    # (in the simulator, outside a session, the simulator's own observation: a replay's
    # simulated launch, _preflight.simulated_launch, relies on it even with native on)
    if s is None and (E.simulator() or not enabled()):
        return None
    obs = NativeObservation()
    if s is not None:
        s.observations.append(obs)
    _STATE.setdefault("open", []).append(obs)
    return obs


def release(obs: "NativeObservation") -> None:
    """The ``observing()`` block of ``obs`` ended."""
    opened = _STATE.setdefault("open", [])
    if obs in opened:
        opened.remove(obs)


def runner(obs: Any) -> Any:
    """How ``_observe.launch`` launches for ``obs``: its instrumented build when ``obs`` is
    native, or (a launch with an unwatched observation inside a native ``observing()``
    block, as the simulator's patches see every launch in the block) the innermost open
    native observation's; else ``E.launch``."""
    if getattr(obs, "native", False):
        return obs.run if obs.live else E.launch
    opened = _STATE.get("open") or []
    if opened and opened[-1].live:
        return opened[-1].run
    return E.launch
