"""import_init: does work done at import decide the outcome, and does deferring it remove the time or
only move it? (The harness's compile step and every stage import the submission again.)

Toggle: every module-level work statement moves, in order, into a run-once block at the top of
custom_kernel.
"""
from __future__ import annotations

import ast
import textwrap

from diagnose.edits import apply_edits, line_span
from diagnose.scan import scan_source
from probes.base import ABSENT, NOT_APPLICABLE, RUN, Plan, PlanContext, ProbeInfo, Toggle

INFO = ProbeInfo("import_init", "work done at import time",
                 "module-level calls, instantiations whose __init__ works, loops (static scan)",
                 "defer to the first custom_kernel call", describe="work done at import", sites=("import_init",),
                 moves_work=True)
FLAG = "_diagnose_init_done"


def defer(source: str) -> str:
    scan = scan_source(source)
    work = scan.of("import_init")
    tree = ast.parse(source)
    entry = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "custom_kernel")
    lines = source.splitlines()
    moved = "\n".join(textwrap.dedent("\n".join(lines[s.line - 1: s.end_line])) for s in work)
    bound = sorted({b for s in work for b in s.details["bound"]})
    first = entry.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(entry.body) > 1:
        first = entry.body[1]   # keep the docstring first
    pad = " " * first.col_offset
    block = [f"{pad}global {', '.join([FLAG] + bound)}", f"{pad}if not {FLAG}:", f"{pad}    {FLAG} = True"]
    block += [f"{pad}    {x}" if x else "" for x in moved.splitlines()]
    edits = [(line_span(s.line, s.end_line), "") for s in work]
    edits[0] = (line_span(work[0].line, work[0].end_line), f"{FLAG} = False  # diagnose: work moved into custom_kernel\n")
    edits.append(([first.lineno, 0, first.lineno, 0], "\n".join(block) + "\n"))
    return apply_edits(source, edits)


def plan(ctx: PlanContext) -> Plan:
    work = ctx.scan.of("import_init")
    if not work:
        return Plan(ABSENT, "no work at import")
    if not ctx.scan.entry_is_def:
        return Plan(NOT_APPLICABLE, "custom_kernel is not a plain function, so work cannot move into it")
    where = ", ".join(f"L{s.line}" for s in work)
    return Plan(RUN, f"import-time work at {where}", [Toggle(INFO.name, "defer import work", defer, removes=True)])
