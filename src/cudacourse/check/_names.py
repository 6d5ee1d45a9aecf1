"""The names a function reads from outside itself, from its source's AST.

Shared by ``_origin`` (which of the course's helpers a learner's kernel calls) and
``_source`` (what a kernel needs to be rebuilt in another process); below both, so that
neither imports the other for it.
"""

from __future__ import annotations

import ast


def loaded_names(node: ast.AST) -> set[str]:
    """Names read anywhere in the function (decorators excluded), minus its own locals."""
    read, local = set(), set()
    args = node.args
    for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
        if a is not None:
            local.add(a.arg)
    # Defaults and annotations are evaluated when the def runs, in the rebuilt code too.
    header = list(args.defaults) + [d for d in args.kw_defaults if d is not None]
    header += [a.annotation for a in args.posonlyargs + args.args + args.kwonlyargs
               if a.annotation is not None]
    if node.returns is not None:
        header.append(node.returns)
    for n in (x for h in header for x in ast.walk(h)):
        if isinstance(n, ast.Name):
            read.add(n.id)
    for stmt in node.body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name):
                (read if isinstance(n.ctx, ast.Load) else local).add(n.id)
            elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
                local.add(n.name)
            elif isinstance(n, ast.arg):
                local.add(n.arg)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                for a in n.names:
                    local.add((a.asname or a.name).split(".")[0])
    declared = {name for n in ast.walk(node) if isinstance(n, ast.Global) for name in n.names}
    return (read - local) | declared  # a name assigned in the function is local throughout
