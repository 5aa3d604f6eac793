"""What a module binds at its top level, read from its syntax tree without running it.

Python binds a name wherever module-level code runs: inside `if`, `try`, `with`, `for` and `while`
bodies too. A module can also bind names in ways no static reading settles (`globals()[...] = ...`,
`exec`, `from x import *`); `binds_dynamically` says when, so callers let a run decide instead of
refusing a file that Python accepts.
"""
from __future__ import annotations

import ast

_DYNAMIC_CALLS = {"globals", "vars", "exec", "setattr", "locals"}


def top_level(body: list[ast.stmt]):
    """Every statement that runs at module level, compound statements' bodies included."""
    for n in body:
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from top_level(getattr(n, field, None) or [])
        for h in getattr(n, "handlers", None) or []:
            yield from top_level(h.body)
        for c in getattr(n, "cases", None) or []:
            yield from top_level(c.body)


def _targets(n: ast.stmt) -> list[ast.expr]:
    if isinstance(n, ast.Assign):
        return n.targets
    if isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        return [n.target]
    if isinstance(n, (ast.With, ast.AsyncWith)):
        return [i.optional_vars for i in n.items if i.optional_vars is not None]
    return []


def bindings(tree: ast.Module) -> dict[str, list[ast.stmt]]:
    """name -> the module-level statements that bind it, in source order."""
    out: dict[str, list[ast.stmt]] = {}
    for n in top_level(tree.body):
        names = []
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [n.name]
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names = [(a.asname or a.name).split(".")[0] for a in n.names if a.name != "*"]
        else:
            names = [t.id for tg in _targets(n) for t in ast.walk(tg) if isinstance(t, ast.Name)]
        for name in names:
            out.setdefault(name, []).append(n)
    return out


def bound_names(tree: ast.Module) -> set[str]:
    return set(bindings(tree))


def binds_dynamically(tree: ast.Module) -> bool:
    """Whether the module may bind names that no statement names: a star import, or a call of
    globals()/vars()/exec/setattr anywhere in it."""
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _DYNAMIC_CALLS:
            return True
    return False
