"""The probe registry: one line per suspect, its package's name, in the order they run.

Probes that can change the outcome (a crash, a hang) come first, so an interrupted diagnosis still holds
the most useful evidence. Adding a suspect means adding a package (what probes/spec.py lists) and a line
here. This module imports nothing: probes/door.py loads each package's probe.py by these names (and
probes/finders.py each one's find.py), so no probe imports the registry and nothing here imports a probe.
"""

ORDER = (
    "graph_capture",    # outer capture around compiled functions: crashes and hangs
    "compile_mode",     # compile mode / compile at all: crashes, hangs, compile time
    "recompile",        # recompiles per shape: compile time, recompile-limit failures (needs the baseline)
    "fullgraph",        # fullgraph=True: graph breaks raise
    "warmup",           # warmup iteration count: time
    "autotune",         # Triton autotuning at run time: time (needs the baseline)
    "helion",           # Helion autotuning at run time, or forbidden by the evaluator: time, a crash (a tuning run)
    "helion_configs",   # Helion's search over a kernel's configs=[...] list at each new shape: time (a tuning run)
    "search",           # a search written by hand at each new shape: time (a tuning run)
    "extension_build",  # C++/CUDA extension builds: time, a build lock a killed step left (needs the baseline)
    "import_init",      # work at import: time, paid again by every stage's process
    "numerics",         # a wrong result under other numeric settings than the reference's (needs the baseline)
    "cache",            # cold versus warm compile cache: evidence of compile cost, never a fix
)
