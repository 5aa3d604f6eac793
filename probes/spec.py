"""What a probe provides: the hook specifications, written once with their parameters' names, that `register()`
checks every probe against when probes/door.py loads them.

A probe is one package, probes/<name>/, whose probe.py holds (or re-exports) the hooks below, and one line of
the registry (probes/registry.py). diagnose/ reaches a probe only through probes/door.py, which calls these
hooks by their parameters' names, as pluggy does: an implementation may ask for fewer of them, never for one
the specification does not name, so a hook that is missing or asks for the wrong arguments fails at import,
naming the probe and the hook, not deep inside a run.

Required:
- INFO: ProbeInfo                         what the suspect is, where the scan finds it, how its toggles rank
                                          (probes/base.py); INFO.name is the package's name
- plan(ctx: PlanContext) -> Plan          toggles for this source and evidence, or why the probe does not run

Optional (absent means: nothing of that kind):
- mechanism(session, base) -> str | None  the suspect's whole cost in the baseline, one sentence for the cause
- took(base, run) -> (bool, str) | None   whether the variant's run itself shows the suspect's work gone,
                                          overriding the time measure (None: its evidence cannot say)
- WORDS: tuple[str, ...]                  the words that carry its evidence in a run (event kinds, fact keys):
                                          tests/test_structure.py checks that diagnose/ names them in at most
                                          two files, so its knowledge stays here
- MECHANISM_WORDS: dict[str, str]         each of INFO.mechanisms (the sampler's name for time spent inside a
                                          library) in words, for a hot spot's sentence
- MECHANISM_HINTS: dict[str, str]         what to do about time inside one of them when no toggle was verified
                                          (a clause starting "; ")
- TRIAGE: str                             the word a triage table groups a first-call timeout under when this
                                          probe's suspect is the cause ("compile", "build", ...)
- records(step) -> list[dict]             its evidence records in one step (a StageResult), each with its
                                          `seconds`, read from its facts: with INFO.takes_away "records", what
                                          its toggle takes away is measured on them (analysis/effects/effects.py)
- RECORDS: str                            those records in words ("extension builds"), for that measure
- report(session, code) -> list[str]      its section of report.md, Markdown lines ([]: none); `code` is the
                                          renderer's code span for any text of the run
- REPORT: tuple[str, str]                 that section's heading and what its fold holds, in a few words
- measure(base, run) -> (reached, removed, what)
                                          with INFO.takes_away "measure": what its toggle took away, measured by the
                                          probe itself on evidence only it reads (analysis/effects/effects.py makes it
                                          an Effect: reached, removed as bool or None, what in words)
- wrong_by(step) -> str                   how far a wrong output in the step (a StageResult) is from the
                                          reference's, in words, for the verdict's note ('': it cannot say)
- failure(step) -> list[str]              its Markdown lines in the report's Failure section, about the failed
                                          stage ([]: none)
- count(run) -> int                       how many times a run shows its suspect's work (recompiles): with
                                          INFO.takes_away "compile", the compile measure compares it in both runs
- COUNTS: str                             what count() counts, in words
- negatives(session, line) -> list[tuple[str, str]]
                                          what the session's records show against what its own line of the report
                                          ({name, state, why}) says is not there: (audit rule, what they show); the
                                          audit refuses the line for each (analysis/audit/audit_negative.py)
- COMPILE_KWARGS: tuple[str, ...]         the torch.compile keyword arguments its toggles set: the compile measure
                                          compares every compile call's values of them in both runs
- SAVES: tuple[str, ...]                  a runtime switch (INFO.takes_away "switch"): the probes whose records
                                          the switch saves, beside the compile calls
- describe(fixing) -> str                  how a narrative names the suspect, given the labels of the toggles that
                                          fixed it (without it: INFO.describe)
- risks(scan) -> list[dict]               what `check` warns of from the scan alone, before any run:
                                          {line, severity: error|warning, message}, from the scan's site dicts
- spans(step) -> list[dict]               its suspect's work in one step as time spans, each {name, phase, start_s,
                                          end_s (None: still open when the step ended), own}: the trace draws each;
                                          the time of those `own` (the suspect's own work, not a library's) counts
                                          as the probe's in a phase (the first call's split, the evidence table)
- EXPECTED: dict                          what the tests expect of it, kept here so that adding a probe touches its
                                          package alone: "round9", its plan's state on reports/examples/round9.py
                                          (tests/test_probes.py); "sliced", each slice in its package's files that
                                          shortens something, {file name: the slices as written}, with why it is no
                                          cut sentence (tests/test_cuts.py)
- find.py: find(scan) -> None             its scan finder, in a module of its own (probes/finders.py loads it by the
                                          package's name, and checks it as these are checked): adds its suspect's
                                          sites (INFO.sites) to the Scanner it is given
                                          (diagnose/source/scan/scanner.py), with the spans its toggles edit
- INFO.hook                               its worker hook, a module of its own package with `install(api)`
                                          (diagnose/runs/worker/plugins.py); its events come back, per stage, in
                                          StageResult.probe_facts[INFO.name]; what a TUNE plan puts in its
                                          hook_args (JSON) reaches the hook in the tuning run as api.args
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import ModuleType

from probes.base import ProbeInfo


class ProbeContractError(TypeError):
    """A registered probe does not provide what spec.py lists: a programming error, named at import."""


@dataclass(frozen=True)
class Hook:
    name: str
    required: bool
    params: tuple[str, ...] | None     # a function's positional parameters; None: an attribute
    kind: type | None = None           # an attribute's type
    says: str = ""

    def asked(self, fn) -> tuple[str, ...] | None:
        """The parameters an implementation asks for, by name (None: a constant hook)."""
        return None if self.params is None else tuple(inspect.signature(fn).parameters)

    def wrong(self, fn) -> str | None:
        """Why an implementation does not fit the specification (None: it does), by its parameters' names: each
        one it asks for is one the specification passes, and it asks for them by name."""
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            return f"{self.name}'s parameters cannot be read ({self.says})"
        odd = [p.name for p in params if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if odd:
            return f"{self.name} takes {', '.join(odd)}, which a call by name cannot fill: {self.says}"
        unknown = [p.name for p in params if p.name not in self.params and p.default is p.empty]
        if unknown:
            return f"{self.name} asks for {', '.join(unknown)}, which the specification does not pass: {self.says}"
        return None


HOOKS = (
    Hook("INFO", True, None, ProbeInfo, "what the suspect is (probes/base.py ProbeInfo)"),
    Hook("plan", True, ("ctx",), says="plan(ctx: PlanContext) -> Plan"),
    Hook("mechanism", False, ("session", "base"), says="mechanism(session, base) -> str | None"),
    Hook("took", False, ("base", "run"), says="took(base, run) -> tuple[bool, str] | None"),
    Hook("WORDS", False, None, tuple, "the words that carry its evidence (event kinds, fact keys)"),
    Hook("MECHANISM_WORDS", False, None, dict, "each of INFO.mechanisms, in words"),
    Hook("MECHANISM_HINTS", False, None, dict, "what to do about time inside a mechanism"),
    Hook("TRIAGE", False, None, str, "its triage class of a first-call timeout"),
    Hook("records", False, ("step",), says="records(step) -> list[dict], each with its seconds"),
    Hook("RECORDS", False, None, str, "its records, in words"),
    Hook("report", False, ("session", "code"), says="report(session, code) -> list[str]"),
    Hook("REPORT", False, None, tuple, "its report section's heading and what its fold holds"),
    Hook("SAVES", False, None, tuple, "the probes whose records a runtime switch saves"),
    Hook("describe", False, ("fixing",), says="describe(fixing: list[str]) -> str"),
    Hook("risks", False, ("scan",), says="risks(scan: list[dict]) -> list[dict], each {line, severity, message}"),
    Hook("measure", False, ("base", "run"), says="measure(base, run) -> tuple[bool, bool, str]"),
    Hook("spans", False, ("step",), says="spans(step) -> list[dict], each {name, phase, start_s, end_s, own}"),
    Hook("wrong_by", False, ("step",), says="wrong_by(step) -> str"),
    Hook("failure", False, ("step",), says="failure(step) -> list[str]"),
    Hook("count", False, ("run",), says="count(run) -> int"),
    Hook("COUNTS", False, None, str, "what count() counts, in words"),
    Hook("negatives", False, ("session", "line"), says="negatives(session, line: dict) -> list[tuple[str, str]]"),
    Hook("COMPILE_KWARGS", False, None, tuple, "the torch.compile keyword arguments its toggles set"),
    Hook("EXPECTED", False, None, dict, "what the tests expect of it: round9 (a PlanState), sliced ({file: slices})"),
)
# A probe's scan finder, the one hook of its find.py (probes/finders.py): a toggle re-scans with every probe's
FINDER = Hook("find", False, ("scan",), says="find(scan: Scanner) -> None, adding its sites")
# Hooks that only make sense together, and what INFO.takes_away a measure on them needs
PAIRS = (("records", "RECORDS"), ("report", "REPORT"), ("count", "COUNTS"))
NEEDS = {"records": ("records", "RECORDS"), "switch": ("SAVES",), "measure": ("measure",)}


def _hook_problems(module: ModuleType) -> list[str]:
    out = []
    for h in HOOKS:
        if not hasattr(module, h.name):
            if h.required:
                out.append(f"it has no {h.name} ({h.says})")
            continue
        value = getattr(module, h.name)
        if h.params is None:
            if not isinstance(value, h.kind):
                out.append(f"{h.name} is a {type(value).__name__}, not a {h.kind.__name__} ({h.says})")
            continue
        if not callable(value):
            out.append(f"{h.name} is a {type(value).__name__}, not a function ({h.says})")
            continue
        wrong = h.wrong(value)
        if wrong:
            out.append(wrong)
    return out


def _word_problems(module: ModuleType) -> list[str]:
    info = module.INFO
    out = [f"WORDS holds {w!r}, not a word" for w in getattr(module, "WORDS", ()) if not isinstance(w, str) or not w]
    for table in ("MECHANISM_WORDS", "MECHANISM_HINTS"):
        stray = sorted(set(getattr(module, table, {})) - set(info.mechanisms))
        if stray:
            out.append(f"{table} names {', '.join(stray)}, which INFO.mechanisms does not list")
    unsaid = sorted(set(info.mechanisms) - set(getattr(module, "MECHANISM_WORDS", {})))
    if unsaid:
        out.append(f"MECHANISM_WORDS does not say {', '.join(unsaid)} (each of INFO.mechanisms, in words)")
    return out


def _pair_problems(module: ModuleType) -> list[str]:
    out = [f"it has {a} without {b}" for pair in PAIRS for a, b in (pair, pair[::-1])
           if hasattr(module, a) and not hasattr(module, b)]
    kind = module.INFO.takes_away
    out += [f"INFO.takes_away is {kind!r}, which measures its {need}: it has none" for need in NEEDS.get(kind, ())
            if not hasattr(module, need)]
    odd = sorted(set(getattr(module, "EXPECTED", {})) - {"round9", "sliced"})
    if odd:
        out.append(f"EXPECTED holds {', '.join(odd)}: the tests read round9 and sliced")
    report = getattr(module, "REPORT", ("## ", ""))
    if len(report) != 2 or not str(report[0]).startswith("## "):
        out.append(f"REPORT is {report!r}, not (a '## ' heading, what its fold holds)")
    return out


def problems(module: ModuleType) -> list[str]:
    """What a probe module lacks or has wrong against the contract, one line each (empty: it holds)."""
    out = _hook_problems(module)
    if out and not isinstance(getattr(module, "INFO", None), ProbeInfo):
        return out
    info = module.INFO
    parts = module.__name__.split(".")
    package = parts[1] if len(parts) == 3 else ""
    if not (parts[0] == "probes" and parts[-1] == "probe" and package):
        out.append("it is not the probe.py of a package of probes/ (probes/<name>/probe.py)")
    elif info.name != package:
        out.append(f"INFO.name is {info.name!r}, its package is {package!r}: the worker names its facts by the "
                   f"package")
    if info.hook and not info.hook.startswith(f"probes.{package}."):
        out.append(f"its hook {info.hook} is not a module of its own package")
    return out + _word_problems(module) + _pair_problems(module)


def register(modules: list[ModuleType]) -> list[ModuleType]:
    """The registry, each probe checked against the contract: a wrong or missing hook fails here, at import."""
    wrong = [f"{m.__name__}: {p}" for m in modules for p in problems(m)]
    names = [m.INFO.name for m in modules if isinstance(getattr(m, "INFO", None), ProbeInfo)]
    wrong += [f"two probes are named {n!r}" for n in sorted({n for n in names if names.count(n) > 1})]
    if wrong:
        raise ProbeContractError("a probe does not hold to probes/spec.py:\n  " + "\n  ".join(wrong))
    return list(modules)
