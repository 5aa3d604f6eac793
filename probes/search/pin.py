"""Write what a search kept back into the source, where the code reads it: the edits of the search probe.

Each place the tuning run recorded (hook.py) is pinned right after the module-level statement that binds it, so
the code finds the values there and skips the search:

- a dict (module-level, a class's, a module-level instance's): `<path>.update({...})`, or the dict itself where
  the code makes it only at run time
- an attribute bound again at run time: `<path> = <value>`
- a functools cache (a function's, a method's): the function is wrapped by a table looked up first, with what the
  cache returned for each argument tuple; arguments it has never seen still reach the search.
- a list the choices were appended to: its contents at the tuning run's end.
- a mapping of a library's (os.environ, a WeakValueDictionary): `<path>.update({...})` with what the searches
  added to it; a dict, with every entry the searches added even where a bounded cache had dropped it by the end.
- objects of the submission's own classes (a per-shape plan) are made again by `_pinned_object` (objects.py), after
  the module binds their class.

A binding inside a module-level `try`, `if`, `with` or loop counts: the pin goes after that whole statement.

`pin_returns` pins a search's function itself (returns.py recorded what it returned for each key): its body first
looks its key up in a table and returns what the search returned there, however the code keeps or passes the
choice on (a staticmethod over an lru_cache, a closure's dict, a thread). A key the table lacks still searches.
"""
from __future__ import annotations

import ast

from diagnose.source.edits import apply_edits
from probes.search.key import KEY_NAME, KEY_SOURCE
from probes.search.objects import MAKE, OBJECT_SOURCE, classes

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


_BLOCKS = (ast.If, ast.Try, ast.With, ast.For, ast.While) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


def _binds(node, name: str) -> bool:
    """The statement binds `name` at module level: itself, or anywhere in its blocks (never inside a def or a class
    body, whose names are not the module's)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name.split(".")[0]) == name for a in node.names)
    if isinstance(node, ast.Assign):
        return any(isinstance(n, ast.Name) and n.id == name for t in node.targets for n in ast.walk(t))
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return isinstance(node.target, ast.Name) and node.target.id == name
    if isinstance(node, _BLOCKS):
        if isinstance(node, ast.With) and any(i.optional_vars is not None and any(
                isinstance(n, ast.Name) and n.id == name for n in ast.walk(i.optional_vars)) for i in node.items):
            return True
        if isinstance(node, ast.For) and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.target)):
            return True
        inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                 *(x for h in getattr(node, "handlers", []) for x in h.body)]
        return any(_binds(x, name) for x in inner)
    return False


def binding_end(source: str, name: str) -> int | None:
    """The last line of the last module-level statement that binds `name` (an assignment, a def, a class, or a
    try / if / with / loop with one inside)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, RecursionError, ValueError):
        return None
    end = None
    for node in tree.body:
        if _binds(node, name):
            end = node.end_lineno or node.lineno
    return end


def _head_end(tree: ast.Module) -> int:
    """The last line of the module's docstring and `from __future__` imports: where an import may go first."""
    end = 0
    for i, node in enumerate(tree.body):
        doc = i == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
        if not (doc or isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            break
        end = node.end_lineno or node.lineno
    return end


def _where(source: str, p: dict) -> tuple[int, str]:
    """The line after which a place's pin goes (its owner and the classes of its objects bound), and a prefix the
    statement needs there (`import os` for os.environ in a file that never imports it)."""
    owner = p["path"].split(".")[0]
    at = binding_end(source, owner)
    prefix = ""
    if at is None and p["kind"] == "mapping" and p["path"] == "os.environ":
        at, prefix = _head_end(ast.parse(source)), "import os\n"
    if at is None:
        raise ValueError(f"`{p['path']}` is bound nowhere at module level")
    for cls in classes(p["text"]):
        end = binding_end(source, cls)
        if end is None:
            raise ValueError(f"`{p['path']}` holds objects of {cls}, which is bound nowhere at module level")
        at = max(at, end)
    return at, prefix


def statement(kind: str, path: str, text: str, method: bool) -> str:
    if kind == "mapping":       # a mapping of a library's: what the searches added to it
        return f"{path}.update({text})\n"
    if kind == "attr" and not path.rpartition(".")[2].isidentifier():
        owner, _, attr = path.rpartition(".")
        return f"setattr({owner}, {attr!r}, {text})\n"
    if kind == "dict":          # a dict made at import, or made at the first call (`_CACHE = None` until then)
        owner, _, attr = path.rpartition(".")
        now = f"getattr({owner}, {attr!r}, None)" if owner else f"globals().get({path!r})"
        return f"if isinstance({now}, dict):\n    {path}.update({text})\nelse:\n    {path} = dict({text})\n"
    if kind == "cache":
        return f"{path} = {SEEDED}({path}, {text}{', method=True' if method else ''})\n"
    if kind == "list":
        return f"{path}[:] = {text}\n"
    return f"{path} = {text}\n"


def pin(source: str, places: list[dict]) -> str:
    """Every place, after its owner's binding; the cache helper once, before the first that needs it."""
    at_line: dict[int, str] = {}
    for p in places:
        at, prefix = _where(source, p)
        at_line[at + 1] = at_line.get(at + 1, "") + (
            f"\n# pinned: what the search kept in `{p['path']}` for each shape in a tuning run; the code finds it "
            f"and skips the search\n" + prefix + statement(p["kind"], p["path"], p["text"], bool(p.get("method"))))
    helpers = ([_HELPER] if any(p["kind"] == "cache" for p in places) else []) + \
        ([OBJECT_SOURCE] if any(f"{MAKE}(" in p["text"] for p in places) else [])
    if helpers:
        first = min(at_line)
        at_line[first] = "\n\n" + "\n\n".join(helpers) + at_line[first]
    if not source.endswith("\n"):
        source += "\n"
    return apply_edits(source, [([ln, 0, ln, 0], text) for ln, text in at_line.items()])


def table_name(def_line: int) -> str:
    return f"_PINNED_L{def_line}"


def pin_returns(source: str, functions: list[dict]) -> str:
    """Each function ({func, def_line, table}) looks its key up first; the key function and the tables go at the
    file's end, read only when the function is called (after the module's import)."""
    tree = ast.parse(source)
    defs = {(n.name, n.lineno): n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    lines = source.splitlines()
    edits, tail = [], [f"\n\n# pinned: what each search returned for each shape's key in a tuning run; its function "
                       f"returns it without searching\n{KEY_SOURCE}"]
    if any(f"{MAKE}(" in f["table"] for f in functions):
        tail.append(f"\n{OBJECT_SOURCE}")
    for f in functions:
        named = [n for (name, _), n in defs.items() if name == f["func"]]
        # by its line; in a source another toggle edited first (its lines moved), by its name where only one has it
        node = next((n for n in named if n.lineno == f["def_line"] or
                     any(d.lineno == f["def_line"] for d in n.decorator_list)), named[0] if len(named) == 1 else None)
        if node is None:
            raise ValueError(f"`{f['func']}` is defined nowhere at line {f['def_line']}")
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) and \
                isinstance(first.value.value, str) and len(node.body) > 1:
            first = node.body[1]            # after the docstring: the function keeps its __doc__
        if first.lineno == node.lineno:
            raise ValueError(f"`{f['func']}()` keeps its body on its def line: no line to look its table up on")
        indent = lines[first.lineno - 1][:first.col_offset]
        a = node.args
        names = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]] + \
            [x.arg for x in (a.vararg, a.kwarg) if x is not None]
        table = table_name(f["def_line"])
        guard = (f"{indent}_pinned_k = {KEY_NAME}({', '.join(names)})\n"
                 f"{indent}if _pinned_k in {table}:\n{indent}    return {table}[_pinned_k]\n")
        edits.append(([first.lineno, 0, first.lineno, 0], guard))
        tail.append(f"{table} = {f['table']}\n")
    if not source.endswith("\n"):
        source += "\n"
    return apply_edits(source, edits) + "\n".join(tail)


def pinned_where(places: list[dict]) -> tuple[str, int]:
    """The places pinned, in words, and how many shapes they hold: a per-shape attribute counts one, and one owner's
    several attributes are named together (`_TUNED`'s 5 attributes)."""
    attrs: dict[str, int] = {}
    for p in places:
        if p["kind"] == "attr":
            owner = p["path"].rpartition(".")[0] or p["path"]
            attrs[owner] = attrs.get(owner, 0) + 1
    names, said = [], set()
    for p in places:
        owner = p["path"].rpartition(".")[0] or p["path"]
        if p["kind"] == "attr" and attrs[owner] > 1:
            if owner not in said:
                said.add(owner)
                names.append(f"{owner}'s {attrs[owner]} attributes")
        else:
            names.append(p["path"])
    # places that each hold every shape (a weak table and the list beside it) hold them once; an owner's attributes
    # hold one each
    held = [attrs[owner] for owner in said] + [p.get("entries") or 0 for p in places if p["kind"] != "attr"] + \
        [1 for p in places if p["kind"] == "attr" and attrs[p["path"].rpartition(".")[0] or p["path"]] == 1]
    return ", ".join(names), max(held, default=0)
