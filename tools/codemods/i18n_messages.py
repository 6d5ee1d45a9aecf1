"""Codemod: the checkers' learner-facing messages become catalogue templates, ``T(...)``.

    python tools/codemods/i18n_messages.py            # rewrite src/cudacourse/check/ in place
    python tools/codemods/i18n_messages.py --check    # list what would change, exit 1 if any
    python tools/codemods/i18n_messages.py FILE...    # only these files

What it converts, in the modules of ``MODULES``: every string that reads as prose (two words
in a row, see :func:`prose`), f-string or plain, outside docstrings and outside the places
that are not messages (``EXCLUDED_CALLS``: internal errors, ``print``, regular expressions;
comparisons; subscripts), and every message of ``fail(...)``, ``CheckFailure(...)`` and the
facts of ``passes(...)``/``passed(...)`` whatever they read as.

``f"wrote past the end of {self.name} (size {n})"`` becomes
``T("wrote past the end of {name} (size {n})", name=self.name, n=n)``: each placeholder is
named after its expression (:func:`placeholder`), format specs and ``!r`` are kept, literal
braces are doubled. Names are derived from the expressions alone, so re-running the codemod
on files that others have edited in the meantime gives the same template for the same
message (the catalogue's translations keep matching). A string already inside ``T(...)`` is
left alone: running it twice changes nothing. It adds ``from ..i18n import T`` where needed.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "src" / "cudacourse" / "check"

# Modules whose strings reach a learner (the checkers and the diagnoses they share). Not:
# _instrument/_child/_origin/_source (internal reasons, source generation), _failure (by hand).
MODULES = ("vector", "threads", "memory", "tiling", "attention", "science", "_engine",
           "_observe", "_observation", "_trace", "_replay", "_budget", "_compile")

# The plots: their labels, titles and legends, translated when the figure is made (viz.words.T
# returns the text in the course's language, and sets the Japanese font when it is Japanese).
PLOTS = ("viz/attention", "viz/bench", "viz/flow", "viz/memory", "viz/threads", "viz/tiling",
         "kernels/cpu_vs_gpu")
PLOT_CALLS = {"set_xlabel", "set_ylabel", "set_title", "suptitle", "set_text", "annotate",
              "text", "figtext"}
PLOT_KEYWORDS = {"label", "title", "xlabel", "ylabel"}
IMPORTS = {"kernels/cpu_vs_gpu": "from ..viz.words import T"}  # default: from ..i18n import T

# Calls whose string arguments are not messages for a learner.
EXCLUDED_CALLS = {"print", "TypeError", "RuntimeError", "ValueError", "KeyError",
                  "NotImplementedError", "NotInstrumentable", "AssertionError", "warn",
                  "compile", "search", "match", "fullmatch", "sub", "findall", "finditer",
                  "split", "getattr", "hasattr", "setattr", "resolve", "startswith",
                  "endswith", "replace", "get", "setdefault", "pop", "T", "_", "N_",
                  "gettext", "require_gpu", "encode", "format_exc", "strip_ansi",
                  "sim_part", "join", "program"}  # program: a reference program's code
MESSAGE_CALLS = {"fail", "CheckFailure"}
FACT_CALLS = {"passes", "passed"}
WIDTH = 96  # the lines the codemod writes stay within the house's line length
CAUSE = re.compile(r"^[a-z][a-z0-9_]*$")
PROSE = re.compile(r"[A-Za-z]{3,} +[A-Za-z(`]|[A-Za-z]+ +[A-Za-z]{3,}")
# Functions of these modules that make no message (source text, tool descriptions, logs).
SKIP_FUNCTIONS = {"_compile": {"_unit_source", "status", "toolkit", "_child_module",
                               "_numba_versions", "_warn_once", "_cache_dir", "type_spec"}}

_OPS = {ast.Add: "plus", ast.Sub: "minus", ast.Mult: "times", ast.Div: "over",
        ast.FloorDiv: "over", ast.Mod: "mod", ast.Pow: "pow"}
_WRAPPERS = {"int", "str", "float", "fmt", "abs", "repr", "plain", "_short", "round", "bool",
             "tuple", "list", "sorted", "_dims", "_jsonable"}
_ROOTS = {"self", "E", "O", "_np", "np"}


def literal_text(node: ast.AST) -> str:
    """The text a reader sees, placeholders as ``X``: what :func:`prose` judges."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
    return ""


def prose(node: ast.AST) -> bool:
    return bool(PROSE.search(literal_text(node)))


def placeholder(expr: ast.AST) -> str:
    """A deterministic, readable placeholder name for ``expr``: ``self.name`` -> ``name``,
    ``len(cases)`` -> ``n_cases``, ``op.index + 1`` -> ``index_plus_1``, ``E.fmt(got[-1])``
    -> ``got``."""
    name = _name(expr)
    name = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_") or "value"
    name = re.sub(r"_+", "_", name)[:32].strip("_")
    if name[0].isdigit() or name in {"self", "template"}:
        name = "v_" + name
    return name


def _name(e: ast.AST) -> str:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        if e.attr.startswith("__"):
            return f"{_name(e.value)}_{e.attr.strip('_')}"
        if isinstance(e.value, ast.Name) and e.value.id in _ROOTS or e.attr in {"x", "y", "z"}:
            return e.attr if e.attr not in {"x", "y", "z"} else f"{_name(e.value)}_{e.attr}"
        return e.attr
    if isinstance(e, ast.Call):
        fn = e.func.attr if isinstance(e.func, ast.Attribute) else getattr(e.func, "id", "")
        if fn in _WRAPPERS and e.args:
            return _name(e.args[0])
        if fn == "len" and e.args:
            return "n_" + _name(e.args[0])
        if fn == "join" and e.args:
            return _name(e.args[0])
        if fn == "type" and e.args:
            return "type_" + _name(e.args[0])
        if fn == "getattr" and len(e.args) >= 2 and isinstance(e.args[1], ast.Constant):
            return str(e.args[1].value)
        return fn or "value"
    if isinstance(e, ast.Subscript):
        key = e.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
        if isinstance(e.value, ast.Subscript):
            return _name(e.value)
        return _name(e.value)
    if isinstance(e, ast.BinOp):
        return f"{_name(e.left)}_{_OPS.get(type(e.op), 'op')}_{_name(e.right)}"
    if isinstance(e, ast.UnaryOp):
        return _name(e.operand)
    if isinstance(e, ast.Constant):
        return str(e.value)
    if isinstance(e, ast.IfExp):
        return _name(e.body)
    if isinstance(e, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
        return _name(e.generators[0].iter)
    if isinstance(e, ast.Set | ast.List | ast.Tuple):
        return "values"
    return "value"


def leaves(node: ast.AST) -> list[ast.AST]:
    """The operands of a chain of ``+`` (``"a: " + x + f" {y}"``), in order."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return leaves(node.left) + leaves(node.right)
    return [node]


def is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant)
                                               and isinstance(node.value, str))


def template_of(node: ast.AST) -> tuple[str, list[tuple[str, str]]] | None:
    """(template, [(placeholder, expression source)]) for a str constant, an f-string or a
    ``+`` chain of them and other expressions (each one a placeholder); None when it cannot
    be written as one (a format spec with a placeholder in it)."""
    parts: list[str] = []
    values: list[tuple[str, str]] = []
    by_source: dict[str, str] = {}

    def slot(expr: ast.AST) -> str:
        src = ast.unparse(_Branches().visit(expr))
        name = by_source.get(src)
        if name is None:
            base = placeholder(expr)
            name, k = base, 2
            while name in by_source.values():
                name, k = f"{base}_{k}", k + 1
            by_source[src] = name
            values.append((name, src))
        return name

    segments = []
    for leaf in leaves(node):
        if isinstance(leaf, ast.JoinedStr):
            segments.extend(leaf.values)
        else:
            segments.append(leaf)
    for v in segments:
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            parts.append(v.value.replace("{", "{{").replace("}", "}}"))
            continue
        if not isinstance(v, ast.FormattedValue):
            parts.append("{" + slot(v) + "}")
            continue
        name = slot(v.value)
        conv = {-1: "", 115: "!s", 114: "!r", 97: "!a"}[v.conversion]
        spec = ""
        if v.format_spec is not None:
            if not all(isinstance(s, ast.Constant) for s in v.format_spec.values):
                return None
            spec = ":" + "".join(s.value for s in v.format_spec.values)
        parts.append("{" + name + conv + spec + "}")
    return "".join(parts), values


class _Branches(ast.NodeTransformer):
    """Prose in the branches of a placeholder's ``a if c else b`` / ``a or b`` becomes
    ``T(...)`` too (``why or "Look for 0 / 0..."``)."""

    def _text(self, node: ast.AST) -> ast.AST:
        if is_text(node) and prose(node):
            made = template_of(node)
            if made is not None:
                template, values = made
                return ast.Call(ast.Name("T", ast.Load()), [ast.Constant(template)],
                                [ast.keyword(k, ast.parse(v, mode="eval").body)
                                 for k, v in values])
        return self.visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        node.body, node.orelse = self._text(node.body), self._text(node.orelse)
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        node.values = [self._text(v) for v in node.values]
        return node


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _chunks(text: str, width: int) -> list[str]:
    """``text`` cut at spaces into pieces of at most ``width`` characters (each piece keeps
    its trailing space, so the pieces concatenate back to ``text``)."""
    width = max(width, 24)
    out, line = [], ""
    for word in re.findall(r"\S*\s*", text):
        if not word:
            continue
        if line and len(_quote(line + word.rstrip())) > width:
            out.append(line)
            line = ""
        line += word
    if line or not out:
        out.append(line)
    return out


def render(template: str, values: list[tuple[str, str]], col: int, tail: int = 0) -> str:
    """``T("...", k=v)`` laid out from column ``col``, continuation lines under the template."""
    indent = " " * (col + 2)
    pieces = _chunks(template, WIDTH - col - 3)
    lines = [_quote(p) for p in pieces]
    args = [f"{k}={v}" for k, v in values]
    body = ("\n" + indent).join(lines)
    if args:
        last = len(indent) + len(lines[-1]) if len(lines) > 1 else col + 2 + len(lines[-1])
        for i, a in enumerate(args):
            piece = ", " + a
            if last + len(piece) + 1 + (tail if i == len(args) - 1 else 0) > WIDTH:
                body += ",\n" + indent + a
                last = len(indent) + len(a)
            else:
                body += piece
                last += len(piece)
    return "T(" + body + ")"


class _Finder(ast.NodeVisitor):
    """Collects the string nodes to convert."""

    def __init__(self, skip: set[str] = frozenset(), plots: bool = False) -> None:
        self.skip = skip
        self.plots = plots
        self.found: list[ast.AST] = []
        self.stack: list[ast.AST] = []

    def _take(self, node: ast.AST | None, force: bool) -> None:
        if node is None:
            return
        if isinstance(node, ast.IfExp):
            self._take(node.body, force)
            self._take(node.orelse, force)
            return
        if isinstance(node, ast.BoolOp):
            for v in node.values:
                self._take(v, force)
            return
        parts = leaves(node)
        texts = [p for p in parts if is_text(p)]
        if not texts:
            return
        if len(parts) == 1 and isinstance(node, ast.Constant) and not force and \
                ("{" in node.value or "}" in node.value):
            return  # a str.format template used elsewhere: by hand
        if (force and any(literal_text(p).strip() for p in texts)) or any(map(prose, texts)):
            if node not in self.found:
                self.found.append(node)

    def generic_visit(self, node: ast.AST) -> None:
        self.stack.append(node)
        super().generic_visit(node)
        self.stack.pop()

    def visit_Expr(self, node: ast.Expr) -> None:  # docstrings and bare strings: not messages
        if isinstance(node.value, (ast.Constant, ast.JoinedStr)):
            return
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        return

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.visit(node.value)  # a key is not a message, except a prose key being assigned
        if isinstance(node.ctx, ast.Store):  # (alts[f"{k} steps (one too few)"] = ...)
            self._take(node.slice, False)

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and _callee(exc) not in MESSAGE_CALLS:
            return
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        fn = _callee(node)
        if fn in EXCLUDED_CALLS:
            return
        if fn in MESSAGE_CALLS:
            args = node.args
            first = 0
            if fn == "fail" and len(args) >= 2 and not any(k.arg == "cause"
                                                           for k in node.keywords):
                first = 1  # the kit's fail(cause, message, context, hint)
                if len(args) >= 4:
                    self._take(args[3], True)
            if len(args) > first:
                self._take(args[first], True)
            for kw in node.keywords:
                if kw.arg == "hint":
                    self._take(kw.value, True)
        if self.plots and fn in PLOT_CALLS and node.args:
            self._take(node.args[0], True)
        if self.plots:
            for kw in node.keywords:
                if kw.arg in PLOT_KEYWORDS:
                    self._take(kw.value, True)
        if fn in FACT_CALLS:
            for a in node.args[1:]:
                self._take(a, True)
        if self.plots:  # other keywords are matplotlib's options (loc="lower right")
            self.stack.append(node)
            for child in [node.func, *node.args] + [kw.value for kw in node.keywords
                                                    if kw.arg in PLOT_KEYWORDS]:
                self.visit(child)
            self.stack.pop()
            return
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in self.skip:
            return
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Add) and any(map(is_text, leaves(node))):
            self._take(node, False)
            if node in self.found:
                return
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self._take(node, False)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._take(node, False)  # its parts are not visited: one message


def _callee(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def _offsets(src: str) -> list[int]:
    starts, pos = [], 0
    for line in src.splitlines(keepends=True):
        starts.append(pos)
        pos += len(line.encode())
    starts.append(pos)
    return starts


def convert(src: str, module: str = "") -> str:
    """``src`` with its messages as ``T(...)``; unchanged when there are none left."""
    tree = ast.parse(src)
    plots = module in PLOTS
    finder = _Finder(SKIP_FUNCTIONS.get(module, set()), plots)
    finder.visit(tree)
    raw = src.encode()
    starts = _offsets(src)
    edits = []
    for node in finder.found:
        made = template_of(node)
        if made is None:
            continue
        template, values = made
        line_start = starts[node.lineno - 1]
        col = len(raw[line_start:line_start + node.col_offset].decode())
        a = line_start + node.col_offset
        b = starts[node.end_lineno - 1] + node.end_col_offset
        end = starts[node.end_lineno - 1]
        rest = raw[end + node.end_col_offset:starts[node.end_lineno]].decode().rstrip("\n")
        text = render(template, values, col, len(rest))
        edits.append((a, b, text))
    if not edits:
        return src
    edits.sort()
    for (a1, b1, _), (a2, _b2, _t) in zip(edits, edits[1:]):
        if a2 < b1:
            raise SystemExit(f"overlapping messages at byte {a2}: convert by hand")
    out = raw
    for a, b, text in reversed(edits):
        out = out[:a] + text.encode() + out[b:]
    line = IMPORTS.get(module, "from .words import T" if module.startswith("viz/") else
                       "from ..i18n import T")
    return add_import(out.decode(), line)


def add_import(src: str, line: str = "from ..i18n import T") -> str:
    """``from ..i18n import T`` after the module's first block of imports, unless T is
    already imported there."""
    tree = ast.parse(src)
    last = None
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom) and any(a.asname == "T" or (
                    a.name == "T" and a.asname is None) for a in node.names):
                return src
            last = node
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        elif last is not None:
            break
    lines = src.splitlines(keepends=True)
    at = last.end_lineno if last is not None else 0
    lines.insert(at, line + "\n")
    return "".join(lines)


def files(argv: list[str]) -> list[Path]:
    named = [Path(a) for a in argv if not a.startswith("-")]
    return named or ([CHECK / f"{m}.py" for m in MODULES] +
                     [CHECK.parent / f"{m}.py" for m in PLOTS])


def module_of(path: Path) -> str:
    """``_engine`` for check/_engine.py, ``viz/flow`` for viz/flow.py, ``cpu_vs_gpu``."""
    path = path.resolve()
    if path.parent.name in ("viz", "kernels"):  # a plot module: its folder names it
        return f"{path.parent.name}/{path.stem}"
    return path.stem


def main(argv: list[str]) -> int:
    check = "--check" in argv
    changed = []
    for path in files(argv):
        src = path.read_text()
        new = convert(src, module_of(path))
        if new != src:
            changed.append(path)
            if not check:
                path.write_text(new)
    for path in changed:
        print(("would convert " if check else "converted ") + str(path.relative_to(ROOT)))
    return 1 if (check and changed) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
