"""Codemod: the checker modules use the one public kit, ``cudacourse.check.kit``.

Rewrites each checker module the lesson registry names (``check/<checker>.py``):

* ``from . import _engine as E`` and ``from . import _observe as O`` become
  ``from . import kit as K``; ``from ._cases``/``._trace``/``._replay import ...`` become one
  ``from .kit import ...`` (the same names, so ``module.resolve`` stays patchable);
* ``O.fail(cause, message, context, hint)`` becomes ``K.fail(message, cause=cause,
  context=context, hint=hint)`` (the kit's one ``fail``, the engine's order);
* every other ``E.<name>`` / ``O.<name>`` becomes ``K.<public name>``: the engine's trusted
  NumPy by its public name (``E._float32`` -> ``K.float32``), ``O.passed`` -> ``K.passes``,
  ``O.launch`` -> ``K.launch_observed``, ``O._dims`` -> ``K.dims``.

Usage:

    python tools/codemods/check_kit.py            # rewrite the checker modules
    python tools/codemods/check_kit.py --check    # exit 1 naming the modules it would change
    python tools/codemods/check_kit.py FILE...    # rewrite these files only

Re-runnable and idempotent (a converted module is left as it is), written for a merge: the
other branches' edits to the checkers' bodies (messages, new cases) survive, since only the
names above and ``O.fail``'s argument order change; arguments keep their own text. A name the
kit lacks stops the run naming it (add it to the kit, then run again).
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "src" / "cudacourse" / "check"
ALIASES = {"_engine": "E", "_observe": "O"}
FROM_MODULES = ("_cases", "_trace", "_replay")
RENAMED = {("O", "passed"): "passes", ("O", "launch"): "launch_observed",
           ("O", "_dims"): "dims", ("O", "_verb"): "verb"}
OFAIL_PARAMS = ("cause", "message", "context", "hint")
WIDTH = 99  # the longest line the packing makes


def checker_files() -> list[Path]:
    sys.path.insert(0, str(ROOT / "src"))
    from cudacourse import lessons  # reads files only: no device, no numba

    return [CHECK / f"{name}.py" for name in lessons.CHECKER_MODULES]


def kit_names() -> set[str]:
    """The kit's public names, read from its source (assignments, defs, imports)."""
    tree = ast.parse((CHECK / "kit.py").read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom) and node.level:  # the package's, not typing's
            names |= {a.asname or a.name for a in node.names}
    return {n for n in names if not n.startswith("_")}


def public(alias: str, name: str) -> str:
    return RENAMED.get((alias, name), name.lstrip("_") if alias == "E" else name)


# --- 1. O.fail(cause, message, context, hint) -> K.fail(message, cause=..., ...) ----------

def _offsets(text: str) -> list[int]:
    starts, total = [0], 0
    for line in text.splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


def _is_ofail(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "fail" and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "O")


def _rewrite_one_ofail(text: str, path: str) -> str | None:
    """The text with its first innermost ``O.fail(...)`` call rewritten; None when none."""
    tree = ast.parse(text, path)
    calls = [n for n in ast.walk(tree) if _is_ofail(n)]
    inner = [c for c in calls if not any(_is_ofail(d) for d in ast.walk(c) if d is not c)]
    if not inner:
        return None
    call = min(inner, key=lambda c: (c.lineno, c.col_offset))
    seg = lambda n: ast.get_source_segment(text, n)  # noqa: E731
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None
                                                                  for k in call.keywords):
        raise SystemExit(f"{path}:{call.lineno}: O.fail with *args/**kwargs: convert by hand")
    bound = dict(zip(OFAIL_PARAMS, map(seg, call.args)))
    bound.update({k.arg: seg(k.value) for k in call.keywords})
    if "message" not in bound or "cause" not in bound:
        raise SystemExit(f"{path}:{call.lineno}: O.fail without a cause and a message")
    parts = [bound["message"], f"cause={bound['cause']}"]
    if bound.get("context") not in (None, "None"):
        parts.append(f"context={bound['context']}")
    if bound.get("hint") not in (None, '""', "''"):
        parts.append(f"hint={bound['hint']}")
    # the arguments packed as a person would: onto the current line while it stays within
    # WIDTH, else onto a new one aligned after the parenthesis
    indent = " " * (call.col_offset + len("K.fail("))
    body = parts[0]
    for part in parts[1:]:
        line = (indent + body).rsplit("\n", 1)[-1]
        fits = len(line) + len(", ") + len(part.split("\n")[0]) + 1 <= WIDTH
        body += (", " if fits else ",\n" + indent) + part
    starts = _offsets(text)
    begin = starts[call.lineno - 1] + len(text.splitlines(keepends=True)[call.lineno - 1]
                                          .encode()[:call.col_offset].decode())
    end = starts[call.end_lineno - 1] + len(text.splitlines(keepends=True)[call.end_lineno - 1]
                                            .encode()[:call.end_col_offset].decode())
    return text[:begin] + f"K.fail({body})" + text[end:]


# --- 2. imports -------------------------------------------------------------------------

def _rewrite_imports(text: str, path: str) -> str:
    tree = ast.parse(text, path)
    lines = text.splitlines(keepends=True)
    drop: list[ast.ImportFrom] = []
    names: list[str] = []
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and node.level == 1):
            continue
        if node.module is None and all(a.name in ALIASES and a.asname == ALIASES[a.name]
                                       for a in node.names):
            drop.append(node)
        elif node.module in FROM_MODULES:
            drop.append(node)
            names += [a.name if a.asname in (None, a.name) else f"{a.name} as {a.asname}"
                      for a in node.names]
    if not drop:
        return text
    new = ["from . import kit as K\n"]
    if names:
        new.append(f"from .kit import {', '.join(sorted(dict.fromkeys(names)))}\n")
    first = min(n.lineno for n in drop)
    gone = {i for n in drop for i in range(n.lineno, n.end_lineno + 1)}
    out = []
    for i, line in enumerate(lines, 1):
        if i == first:
            out += new
        if i not in gone:
            out.append(line)
    return "".join(out)


# --- 3. every E.x / O.x (and a bare E / O) -> K.<public> ------------------------------------

def _shifts(text: str, path: str) -> list[tuple[int, int, int, int]]:
    """(first line, last line, column of the parenthesis, change in length) of each call
    whose ``E.x``/``O.x`` callee changes length: its continuation lines aligned inside the
    parentheses move with it."""
    out = []
    for node in ast.walk(ast.parse(text, path)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id in ("E", "O")
                and node.lineno != node.end_lineno):
            delta = len(public(node.func.value.id, node.func.attr)) - len(node.func.attr)
            if delta:
                out.append((node.lineno, node.end_lineno, node.func.end_col_offset, delta))
    return out


def _realign(text: str, shifts: list[tuple[int, int, int, int]]) -> str:
    lines = text.splitlines(keepends=True)
    for first, last, paren, delta in shifts:
        for i in range(first, last):  # 0-based index i is line i + 1: the continuation lines
            line = lines[i]
            lead = len(line) - len(line.lstrip(" "))
            if line.strip() and lead > paren:
                lines[i] = " " * max(lead + delta, 0) + line.lstrip(" ")
    return "".join(lines)


_IN_EXPR = re.compile(r"(?<![\w.])([EO])(?:\.([A-Za-z_]\w*))?(?![\w])")


def _is_fstring(token: str) -> bool:
    prefix = re.match(r"[A-Za-z]*", token).group(0)
    return "f" in prefix.lower()


def _rewrite_fstring(token: str, path: str, line: int, known: set[str]) -> str:
    """The names inside an f-string's replacement fields (Python 3.11 tokenizes the whole
    f-string as one STRING; 3.12 gives its NAME tokens, rewritten like any other)."""
    out, i, depth, start = [], 0, 0, 0
    while i < len(token):
        ch = token[i]
        if depth == 0 and token.startswith(("{{", "}}"), i):
            i += 2
            continue
        if ch == "{":
            if depth == 0:
                out.append(token[start:i + 1])
                start = i + 1
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                out.append(_IN_EXPR.sub(lambda m: _kit_name(m, path, line, known),
                                        token[start:i]))
                start = i
        i += 1
    out.append(token[start:])
    return "".join(out)


def _kit_name(m: re.Match, path: str, line: int, known: set[str]) -> str:
    if m.group(2) is None:
        return "K"
    name = public(m.group(1), m.group(2))
    if name not in known:
        raise SystemExit(f"{path}:{line}: {m.group(1)}.{m.group(2)} has no kit name "
                         f"({name!r}): add it to check/kit.py")
    return f"K.{name}"


def _rewrite_names(text: str, path: str, known: set[str]) -> str:
    shifts = _shifts(text, path)
    toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    starts = _offsets(text)
    edits = []
    for i, tok in enumerate(toks):
        if tok.type == tokenize.STRING and _is_fstring(tok.string):  # Python 3.11: one token
            new = _rewrite_fstring(tok.string, path, tok.start[0], known)
            if new != tok.string:
                begin = starts[tok.start[0] - 1] + tok.start[1]
                edits.append((begin, begin + len(tok.string), new))
            continue
        if tok.type != tokenize.NAME or tok.string not in ("E", "O"):
            continue
        if i and toks[i - 1].type == tokenize.OP and toks[i - 1].string == ".":
            continue  # someone's .E attribute
        begin = starts[tok.start[0] - 1] + tok.start[1]
        if (i + 2 < len(toks) and toks[i + 1].string == "." and toks[i + 2].type
                == tokenize.NAME):
            attr = toks[i + 2]
            name = public(tok.string, attr.string)
            if name not in known:
                raise SystemExit(f"{path}:{tok.start[0]}: {tok.string}.{attr.string} has no "
                                 f"kit name ({name!r}): add it to check/kit.py")
            end = starts[attr.end[0] - 1] + attr.end[1]
            edits.append((begin, end, f"K.{name}"))
        else:
            edits.append((begin, begin + 1, "K"))
    for begin, end, new in reversed(edits):
        text = text[:begin] + new + text[end:]
    return _realign(text, shifts)


def convert(text: str, path: str = "<checker>", known: set[str] | None = None) -> str:
    """The checker module's text using the kit (unchanged when it already does)."""
    known = kit_names() if known is None else known
    while True:
        done = _rewrite_one_ofail(text, path)
        if done is None:
            break
        text = done
    text = _rewrite_imports(text, path)
    text = _rewrite_names(text, path, known)
    compile(text, path, "exec")  # never write a file that does not parse
    return text


def main(argv: list[str]) -> int:
    check = "--check" in argv
    files = [Path(a) for a in argv if a != "--check"] or checker_files()
    known = kit_names()
    changed = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        new = convert(text, str(path), known)
        if new != text:
            changed.append(path)
            if not check:
                path.write_text(new, encoding="utf-8")
    for path in changed:
        print(("would change " if check else "changed ") + str(path))
    return 1 if check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
