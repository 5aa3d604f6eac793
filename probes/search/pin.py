"""Write what a search kept back into the source, where the code reads it: the edits of the search probe.

Each place the tuning run recorded (hook.py) is pinned right after the module-level statement that binds it, so
the code finds the values there and skips the search:

- a dict (module-level, a class's, a module-level instance's): `<path>.update({...})`, or the dict itself where
  the code makes it only at run time
- an attribute bound again at run time: `<path> = <value>`
- a functools cache (a function's, a method's): the function is wrapped by a table looked up first, with what the
  cache returned for each argument tuple; arguments it has never seen still reach the search.
"""
from __future__ import annotations

import ast

from diagnose.source.edits import apply_edits

SEEDED = "_pinned_first"
_HELPER = f'''def {SEEDED}(search, table, method=False):
    """What the search returned for each argument tuple in a tuning run, looked up before it runs."""
    import functools

    @functools.wraps(search)
    def look(*args, **kwargs):
        key = args[1:] if method else args
        if not kwargs and key in table:
            return table[key]
        return search(*args, **kwargs)
    return look
'''


def binding_end(source: str, name: str) -> int | None:
    """The last line of the last module-level statement that binds `name` (an assignment, a def, a class)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, RecursionError, ValueError):
        return None
    end = None
    for node in tree.body:
        names = set()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        if name in names:
            end = node.end_lineno or node.lineno
    return end


def statement(kind: str, path: str, text: str, method: bool) -> str:
    if kind == "dict":          # a dict made at import, or made at the first call (`_CACHE = None` until then)
        owner, _, attr = path.rpartition(".")
        now = f"getattr({owner}, {attr!r}, None)" if owner else f"globals().get({path!r})"
        return f"if isinstance({now}, dict):\n    {path}.update({text})\nelse:\n    {path} = dict({text})\n"
    if kind == "cache":
        return f"{path} = {SEEDED}({path}, {text}{', method=True' if method else ''})\n"
    return f"{path} = {text}\n"


def pin(source: str, places: list[dict]) -> str:
    """Every place, after its owner's binding; the cache helper once, before the first that needs it."""
    at_line: dict[int, str] = {}
    for p in places:
        at = binding_end(source, p["path"].split(".")[0])
        if at is None:
            raise ValueError(f"`{p['path']}` is bound nowhere at module level")
        at_line[at + 1] = at_line.get(at + 1, "") + (
            f"\n# pinned: what the search kept in `{p['path']}` for each shape in a tuning run; the code finds it "
            f"and skips the search\n" + statement(p["kind"], p["path"], p["text"], bool(p.get("method"))))
    if any(p["kind"] == "cache" for p in places):
        first = min(at_line)
        at_line[first] = "\n\n" + _HELPER + at_line[first]
    if not source.endswith("\n"):
        source += "\n"
    return apply_edits(source, [([ln, 0, ln, 0], text) for ln, text in at_line.items()])
