"""graph_capture's scan finder: outer CUDA graph captures (`with torch.cuda.graph(...)`, capture_begin,
make_graphed_callables), and which compiled functions they reach, directly or through helpers, methods,
closures and nested functions in this file. Site "capture"."""
from __future__ import annotations

import ast

from diagnose.source.scan.model import Site, span

CAPTURE_CTX = {"torch.cuda.graph", "torch.cuda.graphs.graph"}
GRAPHED = {"torch.cuda.make_graphed_callables", "torch.cuda.graphs.make_graphed_callables"}


def _direct(scan, body: ast.AST) -> list[dict]:
    """Calls to compiled functions written inside a capture block itself."""
    out = []
    for c in ast.walk(body):
        if not isinstance(c, ast.Call):
            continue
        f = c.func
        if isinstance(f, ast.Name) and f.id in scan.compiled:
            out.append({"name": f.id, "span": span(f)})
        elif isinstance(f, ast.Attribute) and ast.unparse(f) in scan.compiled:
            out.append({"name": ast.unparse(f), "span": span(f)})
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" \
                and f.attr in scan.compiled:
            out.append({"name": f.attr, "span": span(f)})
    return out


def _context(scan, node: ast.With | ast.AsyncWith) -> None:
    for item in node.items:
        ce = item.context_expr
        if isinstance(ce, ast.Call) and scan.alias.qualname(ce.func) in CAPTURE_CTX:
            fn, cls = scan.enclosing(node)
            body = ast.Module(body=node.body, type_ignores=[])
            d = {"kind": "graph_context", "function": fn, "with_span": span(node),
                 "item_span": span(ce), "n_items": len(node.items),
                 "body_lines": [node.body[0].lineno, node.body[-1].end_lineno],
                 "graph_arg": ast.unparse(ce.args[0]) if ce.args else None,
                 "assigned": sorted({t.id for s in ast.walk(body) if isinstance(s, ast.Assign)
                                     for t in s.targets if isinstance(t, ast.Name)}),
                 "calls_compiled": scan.reaches_compiled(body, cls), "direct_compiled": _direct(scan, body)}
            scan.add(Site("capture", node.lineno, node.end_lineno, scan.code(node.lineno), d))


def find(scan) -> None:
    for node in ast.walk(scan.tree):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            _context(scan, node)
        elif isinstance(node, ast.Call):
            q = scan.alias.qualname(node.func)
            fn, cls = scan.enclosing(node)
            if q in GRAPHED:
                d = {"kind": "make_graphed_callables", "function": fn, "span": span(node),
                     "calls_compiled": [a.id for a in node.args if a is node.args[0] and isinstance(a, ast.Name)
                                        and a.id in scan.compiled]}     # the callable, its first argument
                scan.add(Site("capture", node.lineno, node.end_lineno, scan.code(node.lineno), d))
            elif isinstance(node.func, ast.Attribute) and node.func.attr == "capture_begin":
                scope = scan.funcs.defs.get(fn) if fn else None
                d = {"kind": "capture_begin", "function": fn,
                     "calls_compiled": scan.reaches_compiled(scope, cls) if scope else []}
                scan.add(Site("capture", node.lineno, node.end_lineno, scan.code(node.lineno), d))


# modes that record CUDA graphs of their own (what fails inside an outer capture)
GRAPH_MODES = {"max-autotune", "reduce-overhead"}


def risks(scan: list[dict]) -> list[dict]:
    """A capture around compiled functions, before any run: an error where they record graphs of their own."""
    modes = {s["details"]["target"]: s["details"]["mode"] for s in scan if s["suspect"] == "compile"}
    out = []
    for s in scan:
        d = s["details"]
        if s["suspect"] != "capture" or not d.get("calls_compiled"):
            continue
        bad = [f for f in d["calls_compiled"] if modes.get(f) in GRAPH_MODES]
        if bad:
            out.append({"line": s["line"], "severity": "error", "message":
                        f"CUDA graph capture around {', '.join(bad)}, compiled with a mode that records its own "
                        f"CUDA graphs: fails inside the capture ('Cannot prepare for replay during capturing "
                        f"stage') or hangs"})
        else:
            out.append({"line": s["line"], "severity": "warning", "message":
                        f"CUDA graph capture around compiled {', '.join(d['calls_compiled'])}: works only if "
                        f"compiled and warmed up before the capture"})
    return out
