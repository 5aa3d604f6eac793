"""The graph_capture probe's worker side: every CUDA graph capture, as it begins and as it ends (worker/plugins.py
loads this module by name into every stage's process and the evaluator's).

CUDAGraph.capture_begin/capture_end are wrapped once torch is imported: torch.cuda.graph and manual captures both
pass there, and so do cudagraph trees' own. The wrapper only watches: the capture and what it returns are unchanged.

Events (probe_facts["graph_capture"], read back by facts.py):
- {event: "begin", origin, phase, depth}: origin "outer" when the submission started the capture, "inductor" when
  torch's own code did (cudagraph trees); said at once, since a capture that crashes or hangs never reaches its end
- {event: "end", phase, depth}: the innermost open capture ended (its end raised or not)
Imports nothing of diagnose's: it runs in the submission's process.
"""
from __future__ import annotations

import os
import sys

_GRAPHS = os.path.join("torch", "cuda", "graphs.py")


def _origin() -> str:
    """'outer' when the submission started this capture, 'inductor' when cudagraph trees did. Called by the
    wrapper below only: frame 2 is whoever called capture_begin (torch.cuda.graph's frames are skipped)."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.endswith(_GRAPHS):
        f = f.f_back
    if f is None:
        return "outer"
    fn = f.f_code.co_filename
    return "inductor" if (os.sep + "torch" + os.sep) in fn else "outer"


def patch(cls, api) -> bool:
    """Wrap cls.capture_begin/capture_end (torch.cuda.CUDAGraph); False where it is already watched."""
    if getattr(cls.capture_begin, "_diagnose_watched", False):
        return False
    orig_begin, orig_end = cls.capture_begin, cls.capture_end
    depth = [0]     # captures open in this process, nested ones included

    def capture_begin(graph, *a, **kw):
        origin = _origin()
        depth[0] += 1
        api.emit(event="begin", origin=origin, phase=api.phase, depth=depth[0])
        return orig_begin(graph, *a, **kw)

    def capture_end(graph, *a, **kw):
        try:
            return orig_end(graph, *a, **kw)
        finally:
            api.emit(event="end", phase=api.phase, depth=depth[0])
            depth[0] -= 1

    capture_begin._diagnose_watched = True
    cls.capture_begin, cls.capture_end = capture_begin, capture_end
    return True


def _on_torch(torch, api) -> None:
    if torch.cuda.is_available():       # no CUDA, no capture: CUDAGraph stays as it is
        patch(torch.cuda.CUDAGraph, api)


def install(api) -> None:
    api.on_torch(lambda torch: _on_torch(torch, api))
