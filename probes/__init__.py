"""The probe registry: one package per suspect, in the order they run, each checked against probes/spec.py.

Probes that can change the outcome (a crash, a hang) come first, so an interrupted diagnosis still holds
the most useful evidence. Adding a suspect means adding a package (what spec.py lists) and an entry here.
"""
from diagnose.source.scan import ScanResult, scan_source
from probes import (
    autotune,
    cache,
    compile_mode,
    extension_build,
    fullgraph,
    graph_capture,
    helion,
    helion_configs,
    import_init,
    numerics,
    recompile,
    search,
    warmup,
)
from probes.spec import register

REGISTRY = register([
    graph_capture,   # outer capture around compiled functions: crashes and hangs
    compile_mode,    # compile mode / compile at all: crashes, hangs, compile time
    recompile,       # recompiles per shape: compile time, recompile-limit failures (needs the baseline)
    fullgraph,       # fullgraph=True: graph breaks raise
    warmup,          # warmup iteration count: time
    autotune,        # Triton autotuning at run time: time (needs the baseline)
    helion,          # Helion autotuning at run time, or forbidden by the evaluator: time, a crash (a tuning run)
    helion_configs,  # Helion's search over a kernel's configs=[...] list at each new shape: time (a tuning run)
    search,          # a search written by hand at each new shape: time (a tuning run)
    extension_build,  # C++/CUDA extension builds: time, a build lock a killed step left (needs the baseline)
    import_init,     # work at import: time, paid again by every stage's process
    numerics,        # a wrong result under other numeric settings than the reference's (needs the baseline)
    cache,           # cold versus warm compile cache: evidence of compile cost, never a fix
])
BY_NAME = {m.INFO.name: m for m in REGISTRY}
ORDER = [m.INFO.name for m in REGISTRY]


def scan(source: str, tree=None) -> ScanResult:
    """Every suspect's sites in a source: the scan's own (compile calls, compiler settings), then each probe's
    finder in the registry's order (graph_capture's captures come before warmup's loops, which read them)."""
    return scan_source(source, tree, finders=[m.find for m in REGISTRY if hasattr(m, "find")])


def static_risks(sites: list[dict]) -> list[dict]:
    """What `check` warns of from the scan alone (the session's scan, as dicts), in line order; on one line, in
    the registry's order."""
    out = [r for m in REGISTRY if hasattr(m, "risks") for r in m.risks(sites)]
    return sorted(out, key=lambda r: r["line"])


def worker_hooks() -> list[str]:
    """The worker-side modules of the probes that record evidence of their own (ProbeInfo.hook)."""
    return [m.INFO.hook for m in REGISTRY if m.INFO.hook]


def deciding(probe: str | None) -> bool:
    """Can this probe's toggles change the causes (a fix, or a remover in the search)? A probe that can do
    neither (a warm container) informs the report, never the causes, so nothing waits for it."""
    info = BY_NAME[probe].INFO if probe in BY_NAME else None
    return info is None or info.fixes or info.bisect
