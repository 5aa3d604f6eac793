"""search's scan finder: a function that times candidates in a loop (do_bench, CUDA events, a clock) and stores
into a module-level dict: the dict's name and the line of its module-level definition. Site "search"."""
from __future__ import annotations

import ast

from diagnose.source.scan.model import Site
from diagnose.source.scan.names import TIME_FUNCS

EMPTY_DICTS = ("dict", "collections.defaultdict", "defaultdict")


def module_dicts(tree: ast.Module) -> dict[str, int]:
    """Module-level names bound to an empty dict ({} or dict()): name -> the definition's last line."""
    out = {}
    for node in tree.body:
        target, value = (node.targets[0], node.value) if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            else (node.target, node.value) if isinstance(node, ast.AnnAssign) else (None, None)
        empty = (isinstance(value, ast.Dict) and not value.keys) or (
            isinstance(value, ast.Call) and ast.unparse(value.func) in EMPTY_DICTS and not value.keywords)
        if isinstance(target, ast.Name) and empty:
            out[target.id] = node.end_lineno
    return out


def _times(scan, node: ast.AST) -> bool:
    for c in ast.walk(node):
        if isinstance(c, ast.Call):
            q = scan.alias.qualname(c.func) or ast.unparse(c.func)
            if q in TIME_FUNCS or q.endswith("do_bench") or q.endswith("cuda.Event") or q.endswith(
                    ".elapsed_time") or (isinstance(c.func, ast.Attribute) and c.func.attr == "elapsed_time"):
                return True
    return False


def find(scan) -> None:
    dicts = module_dicts(scan.tree)
    if not dicts:
        return
    for fn in ast.walk(scan.tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        loops = [n for n in ast.walk(fn) if isinstance(n, (ast.For, ast.While)) and _times(scan, n)]
        if not loops:
            continue
        stores = sorted({t.value.id for n in ast.walk(fn) if isinstance(n, ast.Assign) for t in n.targets
                         if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in dicts})
        for name in stores:
            scan.add(Site("search", loops[0].lineno, loops[0].end_lineno, scan.code(loops[0].lineno), {
                "memo": name, "defined_at": dicts[name], "function": fn.name}))
