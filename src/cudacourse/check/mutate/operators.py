"""Mutation operators: each makes one plausible learner mistake at one place of a master.

An operator looks at one AST node and returns its replacements (a node, a list of statements
for a statement, or ``[]`` when it does not apply). ``mutants(source)`` applies every operator
at every place, one change per mutant, in a fixed order. ``CAUSES`` says, per operator, the
causes (``check._failure.CAUSES``) its mistake may rightly be diagnosed as: a specific cause
outside them is a misleading diagnosis.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Callable, Iterator

# causes that name no mistake: they show the evidence (the wrong values, what was raised)
GENERIC = frozenset({"wrong_values", "kernel_raised", "replay_error", "not_checked",
                     "nonfinite", "nan_result", "host_function_raised", "does_not_compile"})

# a warp call's mask, width or offset changed, or a lane leaving early: the warp's own causes
_WARP = {"warp_ub", "early_return", "no_shuffle", "divergent_barrier"}
# what running past an array's end, or leaving elements out, may rightly be called
_BOUNDS = {"out_of_bounds_read", "out_of_bounds_write", "off_by_one_guard", "off_by_one",
           "illegal_address", "unwritten", "unfilled_tile", "halo_missing", "dropped_tail",
           "inputs_changed"}
_VALUES = {"constant_offset", "wrong_formula", "wrong_scale", "off_by_one", "unwritten", "overflow",
           "accumulated_into_output", "mass_not_conserved", "lost_population", "wrong_axis",
           "periodic_wrap", "wrong_opposite", "solid_not_copied", "causal_mask_off_by_one",
           "only_first_block", "halo_missing", "unfilled_tile", "dropped_tail"}
_INDEX = _BOUNDS | _VALUES | _WARP | {"swapped_axes", "guard_wrong_axis", "wrong_index",
                              "redundant_work", "serial_work", "no_grid_stride",
                              "pulled_from_output", "push_race", "stale_tile_keys",
                              "missing_barrier", "nondeterministic", "race", "divergent_barrier",
                              "early_return", "grid_axes_swapped", "grid_too_small",
                              "wrong_buffer", "no_tree", "no_tiles", "launch_count",
                              # the tiling checks' race at one line that no barrier explains
                              "slot_collision",
                              # the record: the writer never read an input the formula needs
                              "input_ignored",
                              # what the simulated kernel raised: a thread divided by zero
                              "division_by_zero",
                              # two looks at the stopped threads: a while loop whose
                              # condition's numbers did not move (a fact of the run)
                              "endless_loop"}
_BARRIER = {"missing_barrier", "race", "nondeterministic", "unfilled_tile", "stale_tile_keys",
            "halo_missing", "divergent_barrier", "push_race"}
_LAUNCH = _WARP | {"bad_launch", "only_first_block", "unwritten", "grid_too_small", "grid_axes_swapped",
           "no_grid_stride", "redundant_work", "serial_work", "out_of_bounds_read",
           "out_of_bounds_write", "off_by_one_guard", "dropped_tail", "launch_count",
           "halo_missing", "swapped_axes", "guard_wrong_axis", "missing_barrier", "race",
           "no_tree", "unfilled_tile", "divergent_barrier", "illegal_address", "early_return"}
_HOST = {"implicit_copy", "result_on_device", "no_result", "wrong_dtype", "returned_before_sync",
         "stream_race", "copied_back_early", "no_kernel", "same_buffer_in_out", "copies_in_loop",
         "launch_count", "allocs_in_loop", "dropped_tail", "default_stream", "too_few_streams",
         "sync_copies", "pageable_copy", "copy_instead_of_swap", "stale_buffer", "no_overlap",
         "buffers_reallocated", "buffers_not_swapped", "wrong_buffer", "race", "unwritten",
         "inputs_changed", "not_device_array", "swapped_before_first_step", "needless_upload",
         "wrong_formula", "only_first_block", "grid_too_small", "grid_axes_swapped",
         "bad_launch", "wrong_shape", "nondeterministic"}


@dataclass(frozen=True)
class Operator:
    name: str
    what: str  # the mistake, in words (the report's rows)
    causes: frozenset
    fn: Callable[[ast.AST, ast.AST | None], list]


def _num(v: int | float) -> ast.expr:
    return ast.Constant(v)


def _is_launch(node: ast.AST) -> bool:
    """``kernel[grid, block](...)`` (a call of a subscripted name)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)


# --- the operators ---------------------------------------------------------------------------

def index_shift(node, parent):
    """An array index one off: a[i] -> a[i + 1] / a[i - 1], per index of a tuple."""
    if not isinstance(node, ast.Subscript) or _is_launch(parent) or \
            (isinstance(parent, ast.Call) and parent.func is node):
        return []
    sl = node.slice
    parts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    out = []
    for k, p in enumerate(parts):
        if isinstance(p, (ast.Slice, ast.Constant)):
            continue
        for op in (ast.Add(), ast.Sub()):
            new = copy.deepcopy(node)
            np_ = new.slice.elts if isinstance(new.slice, ast.Tuple) else None
            shifted = ast.BinOp(copy.deepcopy(p), op, _num(1))
            if np_ is None:
                new.slice = shifted
            else:
                np_[k] = shifted
            out.append(new)
    return out


def swap_index_axes(node, parent):
    """a[y, x] -> a[x, y]."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and \
            len(node.slice.elts) == 2 and not _is_launch(parent):
        a, b = node.slice.elts
        if ast.dump(a) != ast.dump(b):
            new = copy.deepcopy(node)
            new.slice.elts = [copy.deepcopy(b), copy.deepcopy(a)]
            return [new]
    return []


def drop_guard(node, parent):
    """``if cond: body`` -> ``body`` (the guard dropped; an ``else`` goes with it)."""
    if isinstance(node, ast.If) and isinstance(node.test, (ast.Compare, ast.BoolOp)):
        return [copy.deepcopy(node.body)]
    if isinstance(node, ast.IfExp) and isinstance(node.test, (ast.Compare, ast.BoolOp)):
        return [copy.deepcopy(node.body)]
    return []


def widen_guard(node, parent):
    """``i < n`` -> ``i <= n``; ``i >= n`` -> ``i > n``."""
    if not isinstance(node, ast.Compare):
        return []
    out = []
    swap = {ast.Lt: ast.LtE, ast.GtE: ast.Gt, ast.Gt: ast.GtE, ast.LtE: ast.Lt}
    for k, op in enumerate(node.ops):
        if type(op) in swap:
            new = copy.deepcopy(node)
            new.ops[k] = swap[type(op)]()
            out.append(new)
    return out


def guard_other_axis(node, parent):
    """``x < a.shape[1]`` -> ``x < a.shape[0]`` inside a comparison (the other axis)."""
    if not isinstance(node, ast.Compare):
        return []
    out = []
    for k, c in enumerate(node.comparators):
        if isinstance(c, ast.Subscript) and isinstance(c.value, ast.Attribute) and \
                c.value.attr == "shape" and isinstance(c.slice, ast.Constant) and \
                c.slice.value in (0, 1):
            new = copy.deepcopy(node)
            new.comparators[k].slice = ast.Constant(1 - c.slice.value)
            out.append(new)
    return out


def _is_call_attr(node, names) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
        isinstance(node.value.func, ast.Attribute) and node.value.func.attr in names


def drop_barrier(node, parent):
    """``cuda.syncthreads()`` removed."""
    return [[ast.Pass()]] if _is_call_attr(node, {"syncthreads", "syncwarp"}) else []


def loop_bounds(node, parent):
    """``range(a, b, s)``: the end one more or one less, the stride doubled."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and
            node.func.id == "range" and node.args):
        return []
    out = []
    end = 0 if len(node.args) == 1 else 1
    for op in (ast.Add(), ast.Sub()):
        new = copy.deepcopy(node)
        new.args[end] = ast.BinOp(copy.deepcopy(node.args[end]), op, _num(1))
        out.append(new)
    if len(node.args) == 3:
        new = copy.deepcopy(node)
        new.args[2] = ast.BinOp(copy.deepcopy(node.args[2]), ast.Mult(), _num(2))
        out.append(new)
    return out


def assign_accumulate(node, parent):
    """``+=`` -> ``=``; ``a[i] = v`` -> ``a[i] += v``."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        return [[ast.Assign([copy.deepcopy(node.target)], copy.deepcopy(node.value),
                            type_comment=None)]]
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
            isinstance(node.targets[0], ast.Subscript):
        return [[ast.AugAssign(copy.deepcopy(node.targets[0]), ast.Add(),
                               copy.deepcopy(node.value))]]
    return []


def arithmetic(node, parent):
    """``+`` <-> ``-``, ``*`` -> ``+``, ``/`` <-> ``//``, ``%`` dropped."""
    if not isinstance(node, ast.BinOp):
        return []
    table = {ast.Add: [ast.Sub], ast.Sub: [ast.Add], ast.Mult: [ast.Add], ast.Div: [ast.FloorDiv],
             ast.FloorDiv: [ast.Div]}
    out = []
    for op in table.get(type(node.op), []):
        new = copy.deepcopy(node)
        new.op = op()
        out.append(new)
    if isinstance(node.op, ast.Mod):
        out.append(copy.deepcopy(node.left))
    return out


def _constant(node, parent) -> bool:
    return isinstance(node, ast.Constant) and not isinstance(node.value, bool) and \
        isinstance(node.value, (int, float)) and \
        not (isinstance(parent, ast.Subscript) and parent.slice is node)  # index_shift's


def constant_off_by_one(node, parent):
    """An integer constant one more or one less."""
    if not _constant(node, parent) or not isinstance(node.value, int):
        return []
    v = node.value
    return [ast.Constant(v + 1)] + ([ast.Constant(v - 1)] if v > 0 else [])


def sign_and_constants(node, parent):
    """A float constant's sign flipped or the constant doubled (0.0 becomes 1.0)."""
    if not _constant(node, parent) or not isinstance(node.value, float):
        return []
    v = node.value
    return [ast.Constant(-v), ast.Constant(2 * v)] if v else [ast.Constant(1.0)]


_BUILTINS = {"threadIdx": ["blockIdx"], "blockIdx": ["threadIdx"],
             "blockDim": ["gridDim"], "gridDim": ["blockDim"]}


def _cuda_builtin(node) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and \
        isinstance(node.value.value, ast.Name) and node.value.value.id == "cuda" and \
        node.value.attr in _BUILTINS and node.attr in ("x", "y")


def cuda_coordinates(node, parent):
    """``cuda.threadIdx.x`` <-> ``cuda.blockIdx.x``, ``blockDim`` <-> ``gridDim``."""
    if not _cuda_builtin(node):
        return []
    out = []
    for other in _BUILTINS[node.value.attr]:
        new = copy.deepcopy(node)
        new.value.attr = other
        out.append(new)
    return out


def cuda_axis(node, parent):
    """``cuda.threadIdx.x`` <-> ``cuda.threadIdx.y`` (the other axis)."""
    if not _cuda_builtin(node):
        return []
    new = copy.deepcopy(node)
    new.attr = "y" if node.attr == "x" else "x"
    return [new]


def grid_call(node, parent):
    """``cuda.grid(2)`` unpacked the other way round: ``x, y = cuda.grid(2)`` -> ``y, x``."""
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and \
            len(node.targets[0].elts) == 2 and isinstance(node.value, ast.Call) and \
            isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "grid":
        new = copy.deepcopy(node)
        new.targets[0].elts.reverse()
        return [[new]]
    return []


def launch_buffers(node, parent):
    """A launch's first two array arguments swapped, or the second replaced by the first
    (aliased)."""
    if not _is_launch(node) or len(node.args) < 2:
        return []
    a, b = node.args[0], node.args[1]
    if not (isinstance(a, ast.Name) and isinstance(b, ast.Name)):
        return []
    swapped = copy.deepcopy(node)
    swapped.args[0], swapped.args[1] = copy.deepcopy(b), copy.deepcopy(a)
    aliased = copy.deepcopy(node)
    aliased.args[1] = copy.deepcopy(a)
    return [swapped, aliased]


def launch_geometry(node, parent):
    """``k[grid, block]``: one block only, the grid one block short, grid and block swapped."""
    if not (_is_launch(node) and isinstance(node.func.slice, ast.Tuple) and
            len(node.func.slice.elts) >= 2):
        return []
    g, b = node.func.slice.elts[0], node.func.slice.elts[1]
    out = []
    one = copy.deepcopy(node)
    one.func.slice.elts[0] = ast.Constant(1)
    out.append(one)
    if not isinstance(g, (ast.Tuple, ast.Name)):  # a name may hold a tuple: no arithmetic
        short = copy.deepcopy(node)
        short.func.slice.elts[0] = ast.BinOp(copy.deepcopy(g), ast.Sub(), _num(1))
        out.append(short)
    elif isinstance(g, ast.Tuple):
        rev = copy.deepcopy(node)
        rev.func.slice.elts[0].elts.reverse()
        out.append(rev)
    swap = copy.deepcopy(node)
    swap.func.slice.elts[0], swap.func.slice.elts[1] = copy.deepcopy(b), copy.deepcopy(g)
    out.append(swap)
    return out


def host_steps(node, parent):
    """A host step dropped: a synchronize, a copy back into a buffer, a buffer swap."""
    if _is_call_attr(node, {"synchronize", "copy_to_host", "copy_to_device"}):
        return [[ast.Pass()]]
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and \
            isinstance(node.value, ast.Tuple) and \
            all(isinstance(e, ast.Name) for e in node.targets[0].elts + node.value.elts):
        return [[ast.Pass()]]  # d_u, d_tmp = d_tmp, d_u dropped
    return []


def host_buffers(node, parent):
    """An output allocated by uploading a host array (``cuda.to_device(np.zeros_like(x))``),
    or a stream argument dropped (the default stream)."""
    out = []
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "device_array_like" and node.args:
        out.append(ast.parse(f"cuda.to_device(np.zeros_like({ast.unparse(node.args[0])}))",
                             mode="eval").body)
    if isinstance(node, ast.Call) and any(k.arg == "stream" for k in node.keywords):
        new = copy.deepcopy(node)
        new.keywords = [k for k in new.keywords if k.arg != "stream"]
        out.append(new)
    return out



_KINDS: dict[int, dict] = {}  # _kinds per function, for one call of ``mutants``


def _kinds(func: ast.FunctionDef) -> dict[str, tuple[str, int]]:
    """The function's own names (parameters, then locals in the order they are first bound)
    with their kind, "array" when ever indexed (``a[...]``), "call" when called, else
    "scalar", and the line they are first bound on (0 for a parameter)."""
    a = func.args
    first: dict[str, int] = {x.arg: 0 for x in a.posonlyargs + a.args + a.kwonlyargs}
    stores = sorted((n.lineno, n.col_offset, n.id) for n in ast.walk(func)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    for line, _col, name in stores:
        first.setdefault(name, line)
    indexed = {n.value.id for n in ast.walk(func) if isinstance(n, ast.Subscript) and
               isinstance(n.value, ast.Name)}
    called = {n.func.id for n in ast.walk(func) if isinstance(n, ast.Call) and
              isinstance(n.func, ast.Name)}
    return {n: ("array" if n in indexed else "call" if n in called else "scalar", line)
            for n, line in first.items()}


_AXIS_PAIRS = [("x", "y"), ("row", "col"), ("rows", "cols"), ("r", "c"), ("i", "j"),
               ("h", "w")]


def _axis_pair(a: str, b: str) -> bool:
    """``a`` and ``b`` name the two axes of one thing: x/y, row/col, r/c, i/j, h/w (alone or
    as a part of the name: tx/ty, nx/ny, ux/uy, row0/col0)."""
    for p, q in _AXIS_PAIRS:
        for u, v in ((p, q), (q, p)):
            if len(u) == 1:  # a letter: one letter of the name exchanged
                if len(a) == len(b) and sum(x != y for x, y in zip(a, b)) == 1 and \
                        {x for x, y in zip(a, b) if x != y} | \
                        {y for x, y in zip(a, b) if x != y} == {u, v}:
                    return True
            elif u in a and a.replace(u, v) == b:
                return True
    return False


def _neighbours(node, func) -> list[str]:
    """The names a slip may take for ``node``'s: the two of the same kind bound just before
    it and the two just after (bound by the use)."""
    if func is None or not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load):
        return []
    kinds = _KINDS.get(id(func)) or _KINDS.setdefault(id(func), _kinds(func))
    if node.id not in kinds or kinds[node.id][0] == "call":
        return []
    kind = kinds[node.id][0]
    same = [n for n in kinds if kinds[n][0] == kind]  # in binding order
    k = same.index(node.id)
    near = same[max(0, k - 2):k] + same[k + 1:k + 3]
    use = getattr(node, "lineno", 10 ** 9)
    return [other for other in near if kinds[other][1] <= use]


def axis_name(node, parent, func=None):
    """A variable of one axis read for the other's: ``row`` -> ``col``, ``tx`` -> ``ty``."""
    return [ast.Name(o, ast.Load()) for o in _neighbours(node, func)
            if _axis_pair(node.id, o)]


def wrong_name(node, parent, func=None):
    """A variable read in place of a neighbour of the same kind (not its other axis, which is
    ``axis_name``): ``a[i] + b[i]`` -> ``a[i] + a[i]``, ``n`` -> ``i``. The learner's slip is
    to a name bound near the right one and before the use."""
    return [ast.Name(o, ast.Load()) for o in _neighbours(node, func)
            if not _axis_pair(node.id, o)]


def swap_operands(node, parent):
    """The operands of a non-commutative operation exchanged: ``a - b`` -> ``b - a``,
    ``a / b`` -> ``b / a``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Sub, ast.Div, ast.FloorDiv,
                                                           ast.Mod, ast.Pow)) and \
            ast.dump(node.left) != ast.dump(node.right):
        return [ast.BinOp(copy.deepcopy(node.right), node.op.__class__(),
                          copy.deepcopy(node.left))]
    return []


def _is_barrier(stmt: ast.AST) -> bool:
    return _is_call_attr(stmt, {"syncthreads", "syncwarp"})


def move_barrier(node, parent, func=None):
    """A barrier one statement too early or too late in its block: the statement before it
    moved after it, or the one after it moved before it."""
    out = []
    for field_name in ("body", "orelse"):
        seq = getattr(node, field_name, None)
        if not isinstance(seq, list):
            continue
        for k, stmt in enumerate(seq):
            if not _is_barrier(stmt):
                continue
            for j in (k - 1, k + 1):  # exchange with the neighbour above, then below
                if 0 <= j < len(seq) and not _is_barrier(seq[j]):
                    new = copy.deepcopy(node)
                    s2 = getattr(new, field_name)
                    s2[k], s2[j] = s2[j], s2[k]
                    out.append(new)
    return out


def drop_store(node, parent):
    """A store into an array forgotten: ``tile[ty, tx] = a[...]`` or ``out[i] = v`` removed."""
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if len(targets) == 1 and isinstance(targets[0], ast.Subscript):
            return [[ast.Pass()]]
    return []


OPERATORS = [
    # stream_race: a host index one off into a per-stream list of buffers gives two streams
    # one buffer, which the trace of the host steps shows
    Operator("index_shift", "an array index one off", frozenset(_INDEX | {"stream_race"}),
             index_shift),
    Operator("swap_index_axes", "the two indices of an array swapped",
             frozenset(_INDEX | {"swapped_axes"}), swap_index_axes),
    Operator("drop_guard", "a guard (if / conditional value) dropped",
             frozenset(_BOUNDS | _BARRIER | _VALUES | {"swapped_axes", "wrong_index",
                                                       "early_return", "redundant_work",
                                                       "serial_work"}), drop_guard),
    Operator("widen_guard", "a comparison widened or narrowed by one",
             frozenset(_BOUNDS | _VALUES | _BARRIER | {"redundant_work", "no_tree",
                                                       "early_return", "endless_loop"}),
             widen_guard),
    # missing_axis: the compile gate says it only of a.shape[k] past the array's axes, which
    # is this mistake on a one-dimensional array
    Operator("guard_other_axis", "a guard comparing with the other axis' size",
             frozenset(_BOUNDS | {"guard_wrong_axis", "swapped_axes", "grid_too_small",
                                  "missing_axis"}),
             guard_other_axis),
    Operator("drop_barrier", "a barrier removed", frozenset(_BARRIER), drop_barrier),
    Operator("loop_bounds", "a loop's end one off, or its stride doubled",
             frozenset(_INDEX | {"no_grid_stride"}), loop_bounds),
    # used_before_assigned: the compile gate says it only of a name read where no assignment
    # reaches it, which `x = e` turned `x += e` on x's first assignment is, in every case
    Operator("assign_accumulate", "`=` and `+=` exchanged",
             frozenset(_VALUES | _BARRIER | {"nondeterministic", "inputs_changed",
                                             "wrong_buffer", "no_tree",
                                             "used_before_assigned"}), assign_accumulate),
    # on the host, `//` turned `/` makes a launch's grid a float, which Numba refuses
    # float_index: the compile gate says it only of an index typed float, which a `/` for
    # `//` in an index makes (the master's indices are integers)
    # list_index: what a host function raised for a list indexed past its end, which a `%`
    # dropped from a stream's number makes
    Operator("arithmetic", "an arithmetic operator changed",
             frozenset(_INDEX | {"bad_launch", "float_index", "list_index"}), arithmetic),
    # grid_dimensions: the compile gate says it only where a cuda.grid(k) / gridsize(k)
    # does not fit its use, which a changed k makes (the master's fit)
    Operator("constant_off_by_one", "an integer constant one more or one less",
             frozenset(_INDEX | _LAUNCH | {"bad_launch", "grid_dimensions"}),
             constant_off_by_one),
    Operator("sign_and_constants", "a float constant's sign flipped or doubled",
             frozenset(_INDEX | _LAUNCH | {"bad_launch"}), sign_and_constants),
    Operator("cuda_coordinates", "a thread coordinate for a block's (or blockDim for gridDim)",
             frozenset(_INDEX | _LAUNCH), cuda_coordinates),
    Operator("cuda_axis", "a coordinate's x for its y",
             frozenset(_INDEX | _LAUNCH), cuda_axis),
    Operator("grid_call", "cuda.grid(2) unpacked the other way round",
             frozenset(_INDEX | {"swapped_axes"}), grid_call),
    Operator("launch_buffers", "a launch's buffers swapped or aliased",
             frozenset(_HOST | _INDEX), launch_buffers),
    Operator("launch_geometry", "a launch's grid or block wrong",
             frozenset(_LAUNCH | _HOST), launch_geometry),
    Operator("host_steps", "a sync, copy or buffer swap dropped", frozenset(_HOST), host_steps),
    Operator("host_buffers", "an output uploaded from the host, or a stream dropped",
             frozenset(_HOST), host_buffers),
    # float_index: a float variable read where an integer one belongs, in an index; on the
    # host, where arrays and numbers are both unindexed names, a number read where an array
    # belongs (or the reverse), or a name read on a line before it is bound
    Operator("wrong_name", "a variable read in place of another of the same kind",
             frozenset(_INDEX | _HOST | _LAUNCH | {"bad_launch", "float_index",
                                                    "number_for_array", "array_for_number",
                                                    "used_before_assigned", "shape_mismatch",
                                                    # a tuple's name read for a number's or an
                                                    # array's: the typing error says so
                                                    "tuple_for_number", "tuple_for_array",
                                                    "list_index", "list_for_array",
                                                    "stream_argument"}),
             wrong_name),
    # used_before_assigned: as for wrong_name, the other axis' variable read on a line
    # before it is bound (the compile gate's refusal says exactly that)
    Operator("axis_name", "a variable of one axis read for the other's (row for col)",
             frozenset(_INDEX | _LAUNCH | {"used_before_assigned"}), axis_name),
    Operator("swap_operands", "the operands of -, /, //, % or ** exchanged",
             frozenset(_INDEX | {"bad_launch", "float_index"}), swap_operands),
    Operator("move_barrier", "a barrier one statement too early or too late",
             frozenset(_BARRIER | {"unwritten"}), move_barrier),
    Operator("drop_store", "a store into an array forgotten",
             frozenset(_BOUNDS | _VALUES | _BARRIER | _HOST | {"wrong_buffer", "no_tree"}),
             drop_store),
]

# A cause that claims a kind of mistake (the axes swapped, one off, a barrier missing) names a
# mutant rightly only when the mutant makes that kind of mistake: elsewhere it points the
# learner the wrong way, so it counts as misleading. Causes that state what the record shows
# (an index past the end, elements never written, a race seen) stay with every operator
# whose change can produce it.
CLAIMS = {
    frozenset({"swapped_axes", "guard_wrong_axis", "grid_axes_swapped"}):
        {"swap_index_axes", "grid_call", "cuda_axis", "axis_name", "guard_other_axis",
         "launch_geometry"},
    frozenset({"off_by_one", "off_by_one_guard", "causal_mask_off_by_one"}):
        {"index_shift", "widen_guard", "loop_bounds", "constant_off_by_one"},
    frozenset({"missing_barrier"}): {"drop_barrier", "move_barrier"},
}


def _claims_kept(op: Operator) -> Operator:
    drop = {c for claims, ops in CLAIMS.items() if op.name not in ops for c in claims}
    return Operator(op.name, op.what, frozenset(op.causes - drop), op.fn)


OPERATORS = [_claims_kept(op) for op in OPERATORS]
BY_NAME = {op.name: op for op in OPERATORS}
_NEEDS_FUNC = {wrong_name, axis_name, move_barrier}


@dataclass(frozen=True)
class Mutant:
    operator: str
    site: int  # the node's number in the walk of the master
    variant: int
    line: int  # the master's line (relative to its cell)
    source: str  # the mutated cell


def _children(node: ast.AST) -> Iterator[tuple[ast.AST, str, int | None]]:
    for fname, value in ast.iter_fields(node):
        if isinstance(value, list):
            for k, v in enumerate(value):
                if isinstance(v, ast.AST):
                    yield v, fname, k
        elif isinstance(value, ast.AST):
            yield value, fname, None


def _walk(tree: ast.AST) -> list[tuple[ast.AST, ast.AST, str, int | None]]:
    """(node, parent, field, position) for every node under a function body, in order."""
    out = []
    stack = [(c, tree, f, k) for c, f, k in _children(tree)]
    stack.reverse()
    while stack:
        node, parent, f, k = stack.pop()
        out.append((node, parent, f, k))
        kids = [(c, node, f2, k2) for c, f2, k2 in _children(node)]
        stack.extend(reversed(kids))
    return out


def _in_body(node: ast.AST, parent: ast.AST, f: str) -> bool:
    """Inside a function's body (not its decorators, signature or docstring)."""
    return not (isinstance(parent, ast.FunctionDef) and f in ("decorator_list", "args",
                                                               "returns"))


def _locate(rep: ast.AST | list, where: ast.AST) -> None:
    """Give new nodes the position of the node they replace (``ast.unparse`` needs one)."""
    for top in rep if isinstance(rep, list) else [rep]:
        for n in ast.walk(top):
            for attr in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
                if attr in n._attributes and getattr(n, attr, None) is None:
                    setattr(n, attr, getattr(where, attr, 1) or 1)


def _sites(tree: ast.Module, func: ast.FunctionDef) -> list:
    """The places an operator may change: the function itself (a barrier moves within its
    body), then every node of its body."""
    return [(func, tree, "body", tree.body.index(func))] + \
        [w for w in _walk(func) if _in_body(w[0], w[1], w[2])]


def mutants(source: str, operators: list[Operator] | None = None) -> list[Mutant]:
    """Every single-change mutant of ``source`` (a solution cell), in a fixed order."""
    tree = ast.parse(source)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    out = []
    _KINDS.clear()
    for op in operators or OPERATORS:
        for fi, func in enumerate(funcs):
            sites = _sites(tree, func)
            for si, (node, parent, f, k) in enumerate(sites):
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                    continue  # a docstring
                reps = op.fn(node, parent, func=func) if op.fn in _NEEDS_FUNC else \
                    op.fn(node, parent)
                for vi, rep in enumerate(reps):
                    _locate(rep, node)
                    # the change made in place, printed, then undone (a copy of the whole
                    # tree per mutant costs minutes over the thousands of them)
                    if isinstance(rep, list):  # statements
                        if k is None:
                            continue
                        seq = getattr(parent, f)
                        seq[k:k + 1] = rep
                        undo = (lambda seq=seq, k=k, n=len(rep), node=node:
                                seq.__setitem__(slice(k, k + n), [node]))
                    elif k is None:
                        setattr(parent, f, rep)
                        undo = (lambda parent=parent, f=f, node=node: setattr(parent, f, node))
                    else:
                        getattr(parent, f)[k] = rep
                        undo = (lambda seq=getattr(parent, f), k=k, node=node:
                                seq.__setitem__(k, node))
                    try:
                        text = ast.unparse(tree)
                    except Exception:  # noqa: BLE001 - a replacement ast cannot print
                        text = None
                    finally:
                        undo()
                    if text is not None:
                        out.append(Mutant(op.name, si, vi, getattr(node, "lineno", 0), text))
    seen, unique = set(), []
    original = ast.unparse(tree)
    for m in out:  # the same text twice (two operators, one mistake) counts once
        if m.source not in seen and m.source != original:
            seen.add(m.source)
            unique.append(m)
    return unique
