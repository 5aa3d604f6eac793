"""Every probe's scan finder, in the registry's order: the scan that `check`, the engine and each toggle run.

A toggle re-scans whatever source it is given (probes/base.py), and one probe's sites may read another's (the
warmup's loops read graph_capture's captures), so a re-scan runs every finder. Each lives in its package's
find.py, loaded here by the registry's names: a probe reaches the others' finders without importing them or the
probes that hold them, so no arrow runs back up from a probe to the registry's loaded list.
"""
from __future__ import annotations

import functools
import importlib
import importlib.util

from diagnose.source.scan import ScanResult, scan_source
from probes.registry import ORDER
from probes.spec import FINDER, ProbeContractError


@functools.cache
def finders() -> tuple:
    """Each probe's find(scan), in the registry's order, checked against probes/spec.py's FINDER."""
    out = []
    for name in ORDER:
        if importlib.util.find_spec(f"probes.{name}.find") is None:
            continue
        fn = getattr(importlib.import_module(f"probes.{name}.find"), "find", None)
        wrong = FINDER.wrong(fn) if callable(fn) else f"it has no find ({FINDER.says})"
        if wrong:
            raise ProbeContractError(f"a probe does not hold to probes/spec.py:\n  probes.{name}.find: {wrong}")
        out.append(fn)
    return tuple(out)


def scan(source: str, tree=None) -> ScanResult:
    """Every suspect's sites in a source: the scan's own (compile calls, compiler settings), then each probe's
    finder in the registry's order (graph_capture's captures come before warmup's loops, which read them)."""
    return scan_source(source, tree, finders=list(finders()))


def sites(source: str, suspect: str):
    """Re-scan a (possibly already edited) source: toggles locate their sites afresh each time."""
    return scan(source).of(suspect)
