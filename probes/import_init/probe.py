"""import_init: does work done at import decide the outcome, and does deferring it remove the time or
only move it? (The harness's compile step and every stage import the submission again.)

Present when the baseline's import spent real time in module-level statements: the sampler says which
statement the import time belongs to (a trivial object built at import is not a suspect). Toggle: those
statements move, in order, into a run-once block at the top of custom_kernel, together with every later
module-level statement that uses what they bind (so `torch.compile(_epilogue)` moves with `_epilogue`).
"""
from __future__ import annotations

import ast
import textwrap
from functools import partial

from diagnose.facts import observed
from diagnose.source.edits import apply_edits, line_span
from probes.base import ABSENT, CANNOT_TOGGLE, NOT_APPLICABLE, RUN, Plan, PlanContext, ProbeInfo, Toggle
from probes.import_init.find import risks  # noqa: F401 - its static risks (spec.py)

INFO = ProbeInfo("import_init", "work done at import time",
                 "where the baseline's import time went, by module-level statement (the sampler)",
                 "defer to the first custom_kernel call", describe="work done at import", sites=("import_init",),
                 needs_baseline=True, plans_early=True, moves_work=True, takes_away="lines")
FLAG = "_diagnose_init_done"
MIN_S, MIN_SHARE = 0.25, 0.10


def _bound(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    return {t.id for t in ast.walk(node) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}


def _loads(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        # a definition's body runs later; only its decorators, bases and defaults run at import
        parts = list(node.decorator_list) + list(getattr(node, "bases", [])) + list(
            getattr(getattr(node, "args", None), "defaults", []) or [])
        return {n.id for p in parts for n in ast.walk(p) if isinstance(n, ast.Name)}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def closure(tree: ast.Module, lines: set[int]) -> list[ast.stmt]:
    """The statements at `lines`, and every later module-level statement that needs what they bind."""
    moved, names = [], set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (
                isinstance(node, ast.FunctionDef) and node.name == "custom_kernel"):
            continue
        if node.lineno in lines or (names and _loads(node) & names):
            moved.append(node)
            names |= _bound(node)
    return moved


def _text(source: str, node: ast.stmt) -> str:
    return " ".join((ast.get_source_segment(source, node) or "").split())


def statements_at(source: str, lines: tuple[int, ...]) -> tuple[str, ...]:
    """The module-level statements at these lines, by their text: what `defer` looks for again in a source
    other toggles have already edited (their lines move, their text does not)."""
    tree = ast.parse(source)
    return tuple(_text(source, n) for n in tree.body if n.lineno in set(lines))


def defer(source: str, lines: tuple[int, ...] = (), texts: tuple[str, ...] = ()) -> str:
    tree = ast.parse(source)
    if texts:
        lines = tuple(n.lineno for n in tree.body if _text(source, n) in set(texts))
    work = closure(tree, set(lines))
    if not work:
        return source        # nothing left to move in this source
    entry = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "custom_kernel")
    src = source.splitlines()
    first_line = lambda n: min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])])  # noqa: E731
    moved = "\n".join(textwrap.dedent("\n".join(src[first_line(n) - 1: n.end_lineno])) for n in work)
    bound = sorted(set().union(*(_bound(n) for n in work)))
    first = entry.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(entry.body) > 1:
        first = entry.body[1]   # keep the docstring first
    pad = " " * first.col_offset
    block = [f"{pad}global {', '.join([FLAG] + bound)}", f"{pad}if not {FLAG}:", f"{pad}    {FLAG} = True"]
    block += [f"{pad}    {x}" if x else "" for x in moved.splitlines()]
    edits = [(line_span(first_line(n), n.end_lineno), "") for n in work]
    edits[0] = (line_span(first_line(work[0]), work[0].end_lineno),
                f"{FLAG} = False  # diagnose: work moved into custom_kernel\n")
    edits.append(([first.lineno, 0, first.lineno, 0], "\n".join(block) + "\n"))
    return apply_edits(source, edits)


def top_statements(tree: ast.Module, by_line: dict[int, float]) -> dict[int, float]:
    """Seconds per module-level statement: a sample on any line inside a statement (the body of a
    module-level loop, the second line of a call) belongs to the statement that holds it."""
    out: dict[int, float] = {}
    for line, sec in by_line.items():
        node = next((n for n in tree.body if n.lineno <= line <= (n.end_lineno or n.lineno)), None)
        key = node.lineno if node is not None else line
        out[key] = out.get(key, 0.0) + sec
    return out


def heavy(ctx: PlanContext, tree: ast.Module) -> dict[int, float]:
    """Module-level statements that took a real share of the baseline's import time."""
    by_stmt = top_statements(tree, observed.import_time_by_statement(ctx.baseline))
    total = sum(by_stmt.values())
    return {ln: round(s, 2) for ln, s in by_stmt.items() if s >= MIN_S and s >= MIN_SHARE * total}


def _library_loading(tree: ast.Module, line: int) -> bool:
    """An import statement: its time is the library loading, not this submission's work. Every other
    statement of the module is the submission's own work, whatever library its calls go into."""
    node = next((n for n in tree.body if n.lineno == line), None)
    return isinstance(node, (ast.Import, ast.ImportFrom))


def _from_source(ctx: PlanContext, tree: ast.Module) -> Plan:
    """Before the baseline: where the file runs its own code at import, the toggle can start with the first
    wave; the baseline's import time is the evidence its plan is made again from."""
    # the scan's import-time sites: module-level statements that reach this file's own or compiled code
    lines = sorted({s.line for s in ctx.scan.of("import_init")} & {n.lineno for n in tree.body})
    if not lines or not ctx.scan.entry_is_def:
        return Plan(ABSENT, "decided from the baseline's import")
    where = ", ".join(f"L{ln}" for ln in lines)
    return Plan(RUN, f"{where} run{'s' if len(lines) == 1 else ''} this file's own code at import (from the "
                     f"source: the baseline's import time says how long it takes)",
                [Toggle(INFO.name, "defer import work", partial(defer, texts=statements_at(ctx.source, tuple(lines))),
                        removes=True)], evidence={"lines": lines})


def plan(ctx: PlanContext) -> Plan:
    try:
        tree = ast.parse(ctx.source)
    except (SyntaxError, RecursionError, ValueError):
        return Plan(CANNOT_TOGGLE, "the source could not be parsed again")
    if ctx.baseline is None:
        return _from_source(ctx, tree)
    hot = heavy(ctx, tree)
    if not hot:
        total = sum(observed.import_time_by_statement(ctx.baseline).values())
        return Plan(ABSENT, f"the import spent {total:.2f} s in module-level statements; none is notable",
                    evidence={"import_s": round(total, 2)})
    if not ctx.scan.entry_is_def:
        return Plan(NOT_APPLICABLE, "custom_kernel is not a plain function, so work cannot move into it")
    libs = {ln: s for ln, s in hot.items() if _library_loading(tree, ln)}
    defs = {ln: s for ln, s in hot.items() if ln not in libs and isinstance(
        next((n for n in tree.body if n.lineno == ln), None), (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    movable = {ln: s for ln, s in hot.items() if ln not in libs and ln not in defs}
    if not movable:
        where = ", ".join(f"L{ln} ({s:.1f} s)" for ln, s in sorted(hot.items()))
        if defs:
            return Plan(CANNOT_TOGGLE, f"the import time went to definitions whose decorators or bodies run at import "
                                       f"({where}): the submission's work, but a definition cannot move into "
                                       f"custom_kernel", evidence={"seconds": hot})
        return Plan(ABSENT, f"the import time went to import statements ({where}): loading libraries, not work "
                            f"this submission does at import", evidence={"seconds": hot})
    where = ", ".join(f"L{ln} ({s:.1f} s)" for ln, s in sorted(movable.items()))
    texts = statements_at(ctx.source, tuple(sorted(movable)))
    return Plan(RUN, f"import-time work at {where}",
                [Toggle(INFO.name, "defer import work", partial(defer, texts=texts), removes=True)],
                evidence={"seconds": movable})


# What the tests expect of this probe (probes/spec.py EXPECTED): its plan's state on reports/examples/round9.py
# (tests/test_probes.py)
EXPECTED = {
    "round9": RUN,   # it starts from the source: L56 runs the file's own class at import
}
