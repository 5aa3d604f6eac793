"""graph_capture: does an outer CUDA graph capture around compiled functions decide the outcome?

Toggles: remove the capture (the body runs eagerly, and replay() runs it again, writing its results into
the tensors the capture produced, as a replayed graph would); or keep the capture and call the compiled
functions' original Python code inside it. CUDA graphs need a GPU: on a CPU this probe does not run.

Evidence: its worker hook (hook.py) says every capture as it begins and ends, and who began it (the submission, or
torch's cudagraph trees); facts.py reads them back into captures, their spans (the trace, the time spent capturing)
and its measure of what a toggle took away.
"""
from __future__ import annotations

import ast
import textwrap
from functools import partial

from diagnose.source.edits import apply_edits
from probes.base import ABSENT, CANNOT_TOGGLE, NOT_APPLICABLE, RUN, Plan, PlanContext, ProbeInfo, Toggle
from probes.finders import sites
from probes.graph_capture.facts import compiled_inside_capture, measure, outer_captures, spans
from probes.graph_capture.find import risks

__all__ = ["HELPER", "INFO", "TRIAGE", "WORDS", "capture_off", "measure", "plan", "risks", "spans",
           "uncompiled_inside"]

INFO = ProbeInfo("graph_capture", "CUDA graph capture around compiled functions",
                 "`with torch.cuda.graph(...)` blocks, capture_begin, make_graphed_callables, and the compiled "
                 "functions they reach (static scan)",
                 "capture off (eager body, replay re-runs it) | capture kept, compiled fn uncompiled inside",
                 describe="an outer CUDA graph capture around a compiled function", sites=("capture",),
                 requires=("compile_mode",),
                 seen=lambda run: outer_captures(run) > 0, takes_away="measure", hook="probes.graph_capture.hook")

# The words that carry its evidence in a run (event kinds, fact keys): probes/spec.py
WORDS = ("capture_begin", "capture_end", "captures")    # its event kinds and field before it had a hook
TRIAGE = "compile"

HELPER = '''

class _diagnose_eager_graph:
    """diagnose: the capture is removed. The body runs eagerly once; graph.replay() runs it again and
    copies its results into the tensors the first pass produced, as a replayed graph would. Those tensors
    are cloned first: a compiled function's CUDA-graph outputs are overwritten by its next run."""

    def __init__(self, graph, body, names, *args, **kwargs):
        self.graph, self.names = graph, names
        self.body = compile(body, "<captured body>", "exec")

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        import ctypes
        import sys
        if exc[0] is not None:
            return False
        frame = sys._getframe(1)
        local = frame.f_locals  # read once: before 3.13 every read re-syncs it and drops earlier writes
        outs = {n: local[n].clone() for n in self.names if hasattr(local.get(n), "clone")}
        local.update(outs)
        if sys.version_info < (3, 13):  # before PEP 667, f_locals writes need pushing back
            ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))
        scope = {**frame.f_globals, **local}
        body = self.body

        def replay():
            ns = dict(scope)
            exec(body, ns)
            for n, t in outs.items():
                t.copy_(ns[n])
        self.graph.replay = replay
        return False
'''


def _targets(source: str, any_capture: bool = False):
    """The `with torch.cuda.graph(g)` blocks to rewrite: those the scan sees reaching compiled code, or
    every one when the run showed compiled code inside a capture that the scan could not follow."""
    return [s for s in sites(source, "capture") if s.details["kind"] == "graph_context"
            and (s.details["calls_compiled"] or any_capture) and s.details["graph_arg"]]


def _after_imports(tree: ast.Module) -> int:
    last = 0
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            last = node.end_lineno
        elif last:
            break
    return last


def capture_off(source: str, any_capture: bool = False) -> str:
    lines = source.splitlines()
    edits = []
    for s in _targets(source, any_capture):
        d = s.details
        b0, b1 = d["body_lines"]
        body = textwrap.dedent("\n".join(lines[b0 - 1: b1]))
        edits.append((d["item_span"], f"_diagnose_eager_graph({d['graph_arg']}, {body!r}, {d['assigned']!r})"))
    at = _after_imports(ast.parse(source))
    edits.append(([at + 1, 0, at + 1, 0], HELPER + "\n\n"))
    return apply_edits(source, edits)


def uncompiled_inside(source: str, any_capture: bool = False) -> str:
    edits = []
    for s in _targets(source, any_capture):
        for call in s.details["direct_compiled"]:
            sp = call["span"]
            text = source.splitlines()[sp[0] - 1].encode()[sp[1]:sp[3]].decode()
            edits.append((sp, f"getattr({text}, '__wrapped__', {text})"))
    return apply_edits(source, edits)


def plan(ctx: PlanContext) -> Plan:
    caps = ctx.scan.of("capture")
    inside = compiled_inside_capture(ctx.baseline)
    if not ctx.gpu:
        if caps:
            return Plan(NOT_APPLICABLE, "CUDA graph capture needs a CUDA GPU, and this machine has none")
        return Plan(ABSENT, "no CUDA graph capture in the submission")
    around = [s for s in caps if s.details["calls_compiled"]]
    if ctx.baseline is not None and not inside and not around:
        n = outer_captures(ctx.baseline)
        return Plan(ABSENT, f"the baseline captured {n} CUDA graph(s), and no compiled code ran inside one"
                    if n else "the baseline captured no CUDA graph")
    if not around and not inside:
        return Plan(ABSENT, "no CUDA graph capture reaches a compiled function" if caps else
                    "no CUDA graph capture in the submission")
    anyc = bool(inside) and not around
    targets = _targets(ctx.source, anyc)
    evidence = {"runtime": inside, "sites": [s.line for s in (around or caps)]}
    where = ", ".join(f"L{s.line}" + (f" -> {', '.join(s.details['calls_compiled'])}" if s.details["calls_compiled"]
                                      else "") for s in (around or targets))
    if not targets:
        held = "; ".join(inside[:3]) + (f"; and {len(inside) - 3} more" if len(inside) > 3 else "")   # never cut
        return Plan(CANNOT_TOGGLE, f"compiled code ran inside a CUDA graph capture ({held}), but the "
                                   f"capture is not a `with torch.cuda.graph(g)` block this probe can rewrite",
                    evidence=evidence)
    toggles = [Toggle(INFO.name, "capture off", partial(capture_off, any_capture=anyc), removes=True)]
    if any(s.details.get("direct_compiled") for s in targets):
        toggles.append(Toggle(INFO.name, "capture kept, compiled fn uncompiled inside",
                              partial(uncompiled_inside, any_capture=anyc)))
    why = f"capture around compiled code at {where}" + (" (seen in the run)" if inside else "")
    return Plan(RUN, why, toggles, evidence=evidence, likely_with=_records_graphs(ctx, around))


def _records_graphs(ctx: PlanContext, around: list) -> list[str]:
    """A capture around a function compiled in a mode that records CUDA graphs of its own (reduce-overhead,
    max-autotune) is the likely interaction: the combination that keeps both is started early."""
    graphing = {s.details.get("target") for s in ctx.scan.of("compile") if s.details.get("records_graphs")}
    return ["compile_mode"] if any(set(s.details["calls_compiled"]) & graphing for s in around) else []


# What the tests expect of this probe (probes/spec.py EXPECTED): its plan's state on reports/examples/round9.py
# (tests/test_probes.py), and each slice in its package that shortens something, by file, with why it is
# no cut sentence (tests/test_cuts.py)
EXPECTED = {
    "round9": RUN,
    "sliced": {
        "probe.py": {"inside[:3]"},                                         # "and N more"
    },
}
