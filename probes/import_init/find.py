"""import_init's scan finder: work done at import: module-level calls, instances whose __init__ works,
comprehensions, loops, and module-level if blocks that do any of these. A definition or a setting (a seed, a
flag, a config write) is no work. Site "import_init"."""
from __future__ import annotations

import ast

from diagnose.source.scan.model import Site, span
from diagnose.source.scan.names import COMPILE

CHEAP_CALLS = {"dict", "list", "set", "tuple", "super", "object", "len", "int", "float", "str", "print",
               "isinstance", "getattr", "setattr", "hasattr", "range", "enumerate", "zip", "min", "max", "sorted",
               "defaultdict", "OrderedDict", "Lock", "RLock"}
SETTINGS_CALLS = ("torch.manual_seed", "torch.set_", "torch.backends", "torch.use_deterministic",
                  "torch._dynamo.config",
                  "torch._inductor.config", "random.seed", "warnings.", "logging.", "os.environ")
# methods whose call at module level builds a table or registers something, rather than working
BOOKKEEPING = ("compile", "register", "setdefault", "append", "get", "items", "keys", "values", "join")


def _init_does_work(scan, cls_name: str) -> bool:
    init = scan.funcs.defs.get(f"{cls_name}.__init__")
    if init is None:
        return False
    calls = scan.funcs.callees(init, cls_name) - CHEAP_CALLS
    return any(not c.startswith("super.") for c in calls) or any(
        isinstance(n, (ast.For, ast.While, ast.ListComp, ast.DictComp, ast.SetComp)) for n in ast.walk(init))


def _call_works(scan, c: ast.Call) -> bool:
    q = scan.alias.qualname(c.func) or ""
    name = c.func.id if isinstance(c.func, ast.Name) else None
    if q == COMPILE or q.startswith(SETTINGS_CALLS) or (name and name in CHEAP_CALLS):
        return False
    if name and name in scan.funcs.classes and not _init_does_work(scan, name):
        return False
    return not (isinstance(c.func, ast.Attribute) and c.func.attr in BOOKKEEPING)


def statement_work(scan, node: ast.AST) -> str | None:
    """What kind of work a module-level statement does at import, or None for a definition or a
    setting (a seed, a flag, a config write)."""
    if isinstance(node, (ast.For, ast.While)):
        return "loop"
    if isinstance(node, ast.If):
        return "if" if any(statement_work(scan, n) for n in node.body + node.orelse) else None
    value = node.value if isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign)) else None
    if value is None:
        return None
    calls = [n for n in ast.walk(value) if isinstance(n, ast.Call)]
    comps = [n for n in ast.walk(value) if isinstance(n, (ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp))]
    if comps and calls:
        return "comprehension"
    return "call" if any(_call_works(scan, c) for c in calls) else None


def find(scan) -> None:
    for node in scan.tree.body:
        kind = statement_work(scan, node)
        if kind is None:
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = [t.id for t in targets if isinstance(t, ast.Name)]
        else:
            bound = sorted({t.id for t in ast.walk(node) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)})
        scan.add(Site("import_init", node.lineno, node.end_lineno, scan.code(node.lineno), {
            "kind": kind, "bound": bound, "calls_compiled": scan.reaches_compiled(node, None),
            "uses": sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}),
            "span": span(node)}))


def risks(scan: list[dict]) -> list[dict]:
    return [{"line": s["line"], "severity": "warning", "message": "compiles at import: every stage's fresh process "
             "pays it again"} for s in scan if s["suspect"] == "import_init" and s["details"].get("calls_compiled")]
