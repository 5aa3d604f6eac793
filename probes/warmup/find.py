"""warmup's scan finder: loops that repeat kernel work (torch calls, compiled functions, helpers that do either)
and whose results are thrown away: for-range loops with literal or named counts (constants, config dicts,
attributes), while loops on a counter or on elapsed time, and comprehensions that repeat work. Site "warmup";
every counted loop, kept or not, goes to the scan's `loops` (a warmup count computed by a call reads them)."""
from __future__ import annotations

import ast

from diagnose.source.scan.model import Site, span
from diagnose.source.scan.names import TIME_FUNCS

# a loop written as a comprehension: [work() for _ in range(n)] repeats work as a for statement does
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _discards(node: ast.For | ast.AsyncFor) -> bool:
    """Is the loop's target unused (or named _...): a repetition, not an iteration over values?"""
    return isinstance(node.target, ast.Name) and (node.target.id.startswith("_") or not any(
        isinstance(n, ast.Name) and n.id == node.target.id and isinstance(n.ctx, ast.Load)
        for n in ast.walk(ast.Module(body=node.body, type_ignores=[]))))


def _range_count(scan, node: ast.For | ast.AsyncFor) -> dict | None:
    it = node.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            and 1 <= len(it.args) <= 2):
        return None
    stop = it.args[-1]
    count = scan.value_of(stop)
    if len(it.args) == 2 and isinstance(count, int):
        start = scan.value_of(it.args[0])
        count = count - start if isinstance(start, int) else None
    return {"form": "range", "count": count if isinstance(count, int) else None, "count_span": span(stop),
            "count_text": ast.unparse(stop), "start_text": ast.unparse(it.args[0]) if len(it.args) == 2 else None,
            "discards": _discards(node)}


def loop_count(scan, node: ast.AST) -> dict | None:
    """How a loop's repetitions are set, and the span a toggle edits: a range() count, a counter bound,
    or an elapsed-time bound. None for a loop over data (not a repetition)."""
    if isinstance(node, COMPREHENSIONS):     # [work() for _ in range(n)]: one generator, a discarded target
        if len(node.generators) != 1 or node.generators[0].ifs:
            return None
        gen = node.generators[0]
        node = ast.For(target=gen.target, iter=gen.iter, body=[ast.Expr(getattr(node, "elt", None) or node.value)],
                       orelse=[], lineno=node.lineno)
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return _range_count(scan, node)
    if isinstance(node, ast.While) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 \
            and isinstance(node.test.ops[0], (ast.Lt, ast.LtE)):
        left, bound = node.test.left, node.test.comparators[0]
        timed = any(isinstance(n, ast.Call) and scan.alias.qualname(n.func) in TIME_FUNCS for n in ast.walk(left))
        value = scan.value_of(bound)
        return {"form": "time" if timed else "counter", "count": value if isinstance(value, (int, float)) else None,
                "count_span": span(bound), "count_text": ast.unparse(bound), "start_text": None, "discards": True}
    return None


def find(scan) -> None:
    captures = scan.of("capture")       # found before: a loop before a capture in its function warms it up
    for node in ast.walk(scan.tree):
        if not isinstance(node, (ast.For, ast.AsyncFor, ast.While, *COMPREHENSIONS)):
            continue
        count = loop_count(scan, node)
        if count is None:
            continue
        fn, cls = scan.enclosing(node)
        body = ast.Module(body=[ast.Expr(getattr(node, "elt", None) or node.value)] if isinstance(
            node, COMPREHENSIONS) else node.body, type_ignores=[])
        work = scan.does_kernel_work(body, cls) or scan.calls_passed_callable(body, fn)
        scan.loops[node.lineno] = {**count, "end_line": node.end_lineno, "kernel_work": work}
        before_capture = any(c.details.get("function") == fn and c.line > node.lineno for c in captures)
        if not (count["discards"] or before_capture) or not work:
            continue
        scan.add(Site("warmup", node.lineno, node.end_lineno, scan.code(node.lineno), {
            **count, "function": fn, "calls_compiled": scan.reaches_compiled(body, cls),
            "before_capture": before_capture}))
