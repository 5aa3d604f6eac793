"""The one door to the probes: diagnose/ (the engine, analysis, output, triage, the CLI) reaches a probe only
through these functions, never by importing a probe's package nor by testing its attributes.

As in pluggy, the hooks are specified once, with their parameters' names (probes/spec.py), and every probe's
implementations are checked against them when this module loads (a hook with a parameter the specification
does not name fails here, naming the probe). A caller names a hook and passes its arguments by those names;
each probe receives the ones its implementation asks for:

    door.call("report", session=s, code=span)    every implementing probe's result, in the registry's order
    door.ask("helion", "wrong_by", step=st)      one probe's result (None: it has no such hook, or no probe)
    door.of("helion", "records")                 one probe's hook as a function of the specification's
                                                 parameters (None where it has none): to hand a measure
    door.values("REPORT"), door.value(p, "TRIAGE")   a constant hook (a word, a table), of all or of one

The probes are loaded by the names in probes/registry.py (a probe's probe.py), so nothing in probes/ imports
this module or loads the registry's list of them.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from probes.base import ProbeInfo
from probes.finders import scan
from probes.registry import ORDER
from probes.spec import HOOKS, ProbeContractError, register

_SPEC = {h.name: h for h in HOOKS}
_MODULES: list[ModuleType] = register([importlib.import_module(f"probes.{name}.probe") for name in ORDER])
_BY_NAME = {m.INFO.name: m for m in _MODULES}
# each probe's implementations: {probe: {hook: (the function or value, the parameters it asks for)}}
_IMPLS = {m.INFO.name: {h.name: (getattr(m, h.name), h.asked(getattr(m, h.name)))
                        for h in HOOKS if hasattr(m, h.name)} for m in _MODULES}


def _spec(hook: str, kwargs: dict | None):
    h = _SPEC.get(hook)
    if h is None:
        raise ProbeContractError(f"probes/spec.py specifies no hook {hook!r}")
    if kwargs is not None and (h.params is None or set(kwargs) != set(h.params)):
        raise ProbeContractError(f"the hook {hook} is called with {sorted(kwargs)}; probes/spec.py specifies "
                                 f"{h.says}")
    return h


def _run(probe: str, hook: str, kwargs: dict):
    fn, asked = _IMPLS[probe][hook]
    return fn(**{k: kwargs[k] for k in asked})


def names() -> tuple[str, ...]:
    """The probes' names, in the registry's order."""
    return ORDER


def known(probe: str | None) -> bool:
    return probe in _BY_NAME


def info(probe: str) -> ProbeInfo:
    """What the probe is (probes/base.py ProbeInfo); KeyError for a name the registry does not hold."""
    return _BY_NAME[probe].INFO


def infos() -> list[ProbeInfo]:
    return [m.INFO for m in _MODULES]


def has(probe: str | None, hook: str) -> bool:
    _spec(hook, None)
    return hook in _IMPLS.get(probe or "", {})


def implementing(hook: str) -> list[str]:
    """The probes that implement a hook, in the registry's order."""
    _spec(hook, None)
    return [p for p in ORDER if hook in _IMPLS[p]]


def call(hook: str, **kwargs) -> list:
    """Every implementing probe's result, in the registry's order."""
    _spec(hook, kwargs)
    return [_run(p, hook, kwargs) for p in implementing(hook)]


def results(hook: str, **kwargs) -> dict:
    """{probe: its result}, for every probe that implements the hook, in the registry's order."""
    _spec(hook, kwargs)
    return {p: _run(p, hook, kwargs) for p in implementing(hook)}


def ask(probe: str | None, hook: str, **kwargs):
    """One probe's result of a hook; None where the probe has none (or is not a probe)."""
    _spec(hook, kwargs)
    return _run(probe, hook, kwargs) if has(probe, hook) else None


def of(probe: str | None, hook: str):
    """One probe's hook as a function of the specification's parameters, in their order or by name (None where
    it has none): what a measure is handed, to call on runs of its own."""
    h = _spec(hook, None)
    if h.params is None:
        raise ProbeContractError(f"{hook} is a constant, not a function: door.value() reads it")
    if not has(probe, hook):
        return None

    def bound(*args, **kwargs):
        if len(args) > len(h.params):
            raise TypeError(f"{hook} takes {len(h.params)} argument(s): {h.says}")
        return ask(probe, hook, **dict(zip(h.params, args, strict=False)), **kwargs)
    return bound


def value(probe: str | None, name: str, default=None):
    """One probe's constant hook (TRIAGE, RECORDS, ...); `default` where it has none."""
    h = _spec(name, None)
    if h.params is not None:
        raise ProbeContractError(f"{name} is a function: door.ask() calls it")
    return _IMPLS[probe][name][0] if has(probe, name) else default


def values(name: str) -> list:
    """Every probe's constant hook of this name, in the registry's order, where it has one."""
    return [value(p, name) for p in implementing(name)]


def static_risks(sites: list[dict]) -> list[dict]:
    """What `check` warns of from the scan alone (the session's scan, as dicts), in line order; on one line, in
    the registry's order."""
    return sorted((r for rs in call("risks", scan=sites) for r in rs), key=lambda r: r["line"])


def worker_hooks() -> list[str]:
    """The worker-side modules of the probes that record evidence of their own (ProbeInfo.hook)."""
    return [i.hook for i in infos() if i.hook]


def deciding(probe: str | None) -> bool:
    """Can this probe's toggles change the causes (a fix, or a remover in the search)? A probe that can do
    neither (a warm container) informs the report, never the causes, so nothing waits for it."""
    i = _BY_NAME[probe].INFO if probe in _BY_NAME else None
    return i is None or i.fixes or i.bisect


def modules() -> list[ModuleType]:
    """The probes' modules, in the registry's order: for the contract's own checks (tests), never for dispatch."""
    return list(_MODULES)


__all__ = ["ask", "call", "deciding", "has", "implementing", "info", "infos", "known", "modules", "names", "of",
           "results", "scan", "static_risks", "value", "values", "worker_hooks"]
