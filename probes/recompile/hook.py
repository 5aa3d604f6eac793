"""The recompile probe's worker side (worker/plugins.py loads it into every stage's process): say when a recompile
starts, with torch's guard-failure reasons, before it finishes. A compile the deadline cuts off never lands in the
compile metrics, and it is still evidence. Dynamo asks get_and_maybe_log_recompilation_reasons on every cache miss
of a frame it compiled before; it is patched once Dynamo's convert_frame is imported (importing it ourselves would
cost every process about a second).

Events (probe_facts["recompile"], read back by facts.py): {event: "start", code, file, line, reasons} for the first
KEPT starts of a process, and one running count of them all, {event: "starts", n} (a slot: the runner keeps its
latest), so that a storm of recompiles past the runner's cap on a probe's events is still counted whole. Imports
nothing of diagnose's: it runs in the submission's process.
"""
from __future__ import annotations

import functools
import os

KEPT = 100      # starts sent with their reasons; the runner keeps at most 200 events of a probe per stage


def patch(cf, api) -> None:
    orig = getattr(cf, "get_and_maybe_log_recompilation_reasons", None)
    if orig is None or getattr(orig, "_diagnose_watched", False):
        return      # a torch without it: finished recompiles are still recorded
    seen = {"pid": os.getpid(), "n": 0}     # this process's: a forked child counts its own from 0

    @functools.wraps(orig)
    def reasons(*args, **kwargs):
        out = orig(*args, **kwargs)
        try:
            frame = args[1] if len(args) > 1 else kwargs.get("frame")
            code = getattr(frame, "f_code", None)
            if out and code is not None:
                if seen["pid"] != os.getpid():
                    seen.update(pid=os.getpid(), n=0)
                seen["n"] += 1
                if seen["n"] <= KEPT:
                    api.emit(event="start", code=code.co_name, file=code.co_filename, line=code.co_firstlineno,
                             reasons=[str(r)[:300] for r in list(out)[:3]])
                api.emit(event="starts", n=seen["n"], slot="starts")
        except Exception:  # noqa: BLE001 - watching must never change what the compile does
            pass
        return out
    reasons._diagnose_watched = True
    cf.get_and_maybe_log_recompilation_reasons = reasons


def install(api) -> None:
    api.on_import("torch._dynamo.convert_frame", lambda mod: patch(mod, api))
