"""The calls a `for` loop's count is computed by: `for _ in range(_warmup_steps(x)):` repeats a cheap pass three
times, yet its header calls `_warmup_steps`, which may be what costs. An edit of that count (`range(1)`) takes away
both the count and the call. Read from the source's text (the probes plan from it, the audit checks with it):
which calls a count holds, what a plain function returns when it always returns one whole number, and which of a
count's calls an edited header line no longer makes.
"""
from __future__ import annotations

import ast


def _tree(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, RecursionError, ValueError):
        return None


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ast.unparse(f)


def count_calls(source: str, line: int) -> list[dict]:
    """The outermost calls in the `range(...)` count of the `for` loop whose header is at `line`: each with its
    text, the name it calls and whether that is a function the file defines (its own work, not a library's)."""
    tree = _tree(source)
    if tree is None:
        return []
    defs = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    loop = next((n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.AsyncFor)) and n.lineno == line), None)
    it = loop.iter if loop is not None else None
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and it.args):
        return []
    out, inner = [], set()
    for arg in it.args:
        for n in ast.walk(arg):
            if isinstance(n, ast.Call) and id(n) not in inner:
                inner.update(id(x) for x in ast.walk(n) if x is not n)
                out.append({"text": ast.unparse(n), "callee": _callee(n), "own": _callee(n) in defs})
    return out


def returns_int(source: str, callee: str) -> int | None:
    """What the file's function `callee` returns where every return it has gives one and the same whole number
    (a calibration that always answers 3): the count its call evaluates to, without running it."""
    tree = _tree(source)
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.name == callee), None) if tree else None
    if fn is None:
        return None
    values = {r.value.value if isinstance(r.value, ast.Constant) else None
              for r in ast.walk(fn) if isinstance(r, ast.Return)}
    one = values.pop() if len(values) == 1 else None
    return one if isinstance(one, int) and not isinstance(one, bool) else None


def dropped(calls: list[dict], edited_line: str) -> list[dict]:
    """The count's calls that an edited header line no longer makes (the callee is called nowhere on it)."""
    return [c for c in calls if f"{c['callee']}(" not in edited_line]
