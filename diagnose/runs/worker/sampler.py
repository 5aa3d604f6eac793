"""Where each phase's time went, by submission line: a sampling thread in the child.

Every INTERVAL_S the thread reads the main thread's stack (sys._current_frames) and, for the phase that
is open, counts: the innermost submission line (where the time is spent), the submission line that
called into torch or another library (what the submission asked for), the module-level statement being
executed during an import (which statement the import time belongs to), every submission line on the
stack once (inclusive time: a loop that calls a helper holds the helper's time), and which library
mechanism the time went into (MECHANISMS, matched on the frames below the submission's). Counts are
streamed as deltas once a second, so a run killed at its deadline keeps what was measured up to then.
The thread pauses during timing sections: they measure the kernel, and the sampler must not disturb
them. Its own cost is measured (time spent sampling) and reported with the samples.

On Python 3.12+ it also counts how many times each loop header in the submission executed (one
sys.monitoring LINE event per iteration, only on those lines, disabled past LOOP_CAP): the number of
warmup iterations, or of spins of a loop that never ends.
"""
from __future__ import annotations

import ast
import sys
import threading
import time
import types
from collections import Counter

from diagnose.runs.worker.channel import Channel
from diagnose.runs.worker.lines import watch_lines

INTERVAL_S = 0.01
FLUSH_S = 1.0
LOOP_CAP = 1_000_000
TOOL_ID = 4
RAW_CAP = 3000          # raw samples kept per stage, for the trace (aggregates are never capped)
# Where time inside a library call goes, by the library frames under the submission's own: the first
# pattern (in this order) that any of those frames matches ("file:function") names the mechanism.
# A probe's own mechanisms come first (its hook names them: plugins.py Api.on_sample). CUDA's initialisation is
# _lazy_init alone: a synchronize() waiting on a kernel sits in the same file, and was once taken for it.
MECHANISMS = [
    ("torch/_inductor/select_algorithm.py", "inductor_autotune"),
    ("torch/_inductor/autotune_process.py", "inductor_autotune"),
    ("triton/compiler/", "triton_compile"),
    ("torch/_inductor/", "inductor_compile"),
    ("torch/_dynamo/", "dynamo"),
    ("torch/cuda/__init__.py:_lazy_init", "cuda_init"),
    ("torch/cuda/__init__.py:synchronize", "cuda_sync"),
    ("torch/cuda/__init__.py:", "cuda_call"),
    ("subprocess.py", "subprocess_wait"),
    ("threading.py", "lock_wait"),
]
_OWN: list = []


def own_mechanism(pattern: str, name: str) -> None:
    """A probe's hook's mechanism (time below a frame of this file is time inside it), matched before the above."""
    _OWN.append((pattern, name))
    MECHANISMS.insert(len(_OWN) - 1, (pattern, name))


class Sampler(threading.Thread):
    def __init__(self, ch: Channel, filename: str, main_ident: int):
        super().__init__(daemon=True, name="diagnose-sampler")
        self.ch, self.filename, self.main_ident = ch, filename, main_ident
        self._halt = threading.Event()
        self._agg: dict[str, dict[str, Counter]] = {}
        self._raw: list = []
        self._n = 0
        self.cost_s = 0.0

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        last_flush = time.monotonic()
        while not self._halt.wait(INTERVAL_S):
            phase = self.ch.phase
            if phase is None or phase.startswith("timing:"):
                continue
            t0 = time.perf_counter()
            frame = sys._current_frames().get(self.main_ident)
            if frame is not None:
                self._sample(phase, frame)
            del frame
            self.cost_s += time.perf_counter() - t0
            if time.monotonic() - last_flush > FLUSH_S:
                self.flush()
                last_flush = time.monotonic()
        self.flush()

    def _sample(self, phase: str, frame) -> None:
        chain = []            # outermost first: (is the submission's, line, code name, file)
        f = frame
        while f is not None:
            chain.append((f.f_code.co_filename == self.filename, f.f_lineno, f.f_code.co_name, f.f_code.co_filename))
            f = f.f_back
        chain.reverse()
        mine = [i for i, c in enumerate(chain) if c[0]]
        if not mine:
            return
        inner = chain[mine[-1]][1]
        # the line that called into a library: the last frame of the outermost run of submission frames
        # (a compiled function's own frame, re-entered from inside torch, is not it), as for the culprit
        i = mine[0]
        while i + 1 < len(chain) and chain[i + 1][0]:
            i += 1
        entry = chain[i][1] if i + 1 < len(chain) else None
        module = next((c[1] for c in chain if c[0] and c[2] == "<module>"), None)
        a = self._agg.setdefault(phase, {"lines": Counter(), "entries": Counter(), "module": Counter(),
                                         "stack": Counter(), "mechanisms": Counter()})
        a["lines"][inner] += 1
        for ln in {chain[i][1] for i in mine}:
            a["stack"][ln] += 1
        below = [f"{c[3]}:{c[2]}".replace("\\", "/") for c in chain[mine[-1] + 1:]]
        mech = next((m for pat, m in MECHANISMS if any(pat in fn for fn in below)), None) if below else None
        if mech:
            a["mechanisms"][f"{inner}|{mech}"] += 1
        if entry is not None:
            a["entries"][entry] += 1
        if module is not None:
            a["module"][module] += 1
        self._n += 1
        if len(self._raw) < RAW_CAP:
            self._raw.append([round(time.time(), 3), phase, inner])

    def flush(self) -> None:
        if not self._agg and not self._raw:
            return
        agg = {ph: {k: {str(ln): n for ln, n in c.items()} for k, c in d.items()} for ph, d in self._agg.items()}
        self.ch.emit("samples", interval_s=INTERVAL_S, phases=agg, raw=self._raw, cost_s=round(self.cost_s, 4))
        self._agg, self._raw = {}, []


def loop_lines(source: str) -> set[int]:
    """Header lines of every for/while loop in the submission."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.lineno for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While, ast.AsyncFor))}


class LoopCounter:
    """How many times each loop header executed (Python 3.12+; a no-op before)."""

    def __init__(self, ch: Channel):
        self.ch = ch
        self.counts: Counter = Counter()
        self.on = sys.version_info >= (3, 12)

    def instrument(self, code: types.CodeType, headers: set[int]) -> None:
        if not self.on or not headers:
            return
        mon = sys.monitoring
        try:
            mon.use_tool_id(TOOL_ID, "diagnose-loops")
        except ValueError:
            self.on = False
            return
        counts = self.counts

        def on_line(c, line):
            if line not in headers:
                return mon.DISABLE
            counts[line] += 1
            if counts[line] >= LOOP_CAP:
                return mon.DISABLE
            return None
        watch_lines(TOOL_ID, code, headers, on_line)

    def flush(self, phase: str | None) -> None:
        if self.counts:
            self.ch.emit("loops", phase=phase, counts={str(k): v for k, v in self.counts.items()},
                         capped=[k for k, v in self.counts.items() if v >= LOOP_CAP])
            self.counts.clear()
