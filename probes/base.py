"""What a probe is, and what it hands the engine.

A probe answers one question: does this suspect matter, and by how much? It declares its suspect, how
it finds it (the static scan, and for some the baseline run's evidence), the toggle it applies and the
values it tries. `plan()` turns those into Toggles, or says why it does not run ("not present",
"not applicable").

A Toggle's `apply` is a source transform that re-scans whatever source it is given, so toggles of
different probes compose (the bisector combines them); `switches` are runtime switches the engine applies
instead (a shared compile cache). `removes` marks the one toggle per probe that the bisector uses to take
this suspect out when it searches combinations.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from diagnose.scan import ScanResult, scan_source
from diagnose.session import Run

RUN, ABSENT, NOT_APPLICABLE = "run", "not present", "not applicable"


@dataclass(frozen=True)
class Toggle:
    probe: str
    label: str
    apply: Callable[[str], str] | None = None
    switches: tuple[str, ...] = ()
    removes: bool = False


@dataclass
class PlanContext:
    source: str
    scan: ScanResult
    gpu: bool
    baseline: Run | None = None


@dataclass
class Plan:
    state: str
    why: str = ""
    toggles: list[Toggle] = field(default_factory=list)
    evidence: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ProbeInfo:
    name: str
    suspect: str
    finds: str
    toggles: str


def sites(source: str, suspect: str):
    """Re-scan a (possibly already edited) source: toggles locate their sites afresh each time."""
    return scan_source(source).of(suspect)
