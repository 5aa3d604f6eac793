"""What a probe is, and what it hands the engine and the bisector.

A probe answers one question: does this suspect matter, and by how much? Its module is the only place
its facts live: INFO says what the suspect is, where the scan finds it, how the bisector names it, how
specific each of its toggles is, whether it needs the baseline run's evidence, and whether its variants
can be fixes. `plan()` turns the source and the evidence into Toggles, or says why it does not run
("not present", "not applicable", or found but "cannot toggle").

A Toggle's `apply` is a source transform that re-scans whatever source it is given, so toggles of
different probes compose (the bisector combines them); `switches` are runtime switches the engine applies
instead (a shared compile cache). `removes` marks the one toggle per probe that the bisector uses to take
this suspect out when it searches combinations.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from diagnose.session import Run
from diagnose.source.scan import ScanResult
from diagnose.status import PlanState

# TUNE: its toggle needs a search's result that no timed run reached: the engine runs one tuning run (every
# shape once, outside any budget) and plans this probe again with it (PlanContext.tuning)
RUN, ABSENT, NOT_APPLICABLE, CANNOT_TOGGLE, TUNE = PlanState
# Runtime switches a toggle may ask for instead of a source edit (the runner applies them):
WARM = "warm_cache"      # reuse the baseline's compile cache instead of a cold one


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
    tuning: Run | None = None     # the tuning run, once one ran (see TUNE)
    rules: list = field(default_factory=list)   # what the problem's evaluator sets: [{name, value, file, line}]
    cases: list = field(default_factory=list)   # the task's test and benchmark cases, for a warm-up written in


@dataclass
class Plan:
    state: PlanState
    why: str = ""
    toggles: list[Toggle] = field(default_factory=list)
    evidence: dict = field(default_factory=dict)
    # TUNE: what the tuning run hands the probe's own worker hook (JSON: its api.args, worker/plugins.py)
    hook_args: dict = field(default_factory=dict)
    # The suspects this one most likely fails only together with, as the source shows them: the engine starts the
    # combination that keeps them all before any toggle has answered (a guess: the search asks again if wrong)
    likely_with: list = field(default_factory=list)


@dataclass(frozen=True)
class ProbeInfo:
    name: str
    suspect: str                 # one line, for `diagnose probes`
    finds: str                   # how it finds the suspect
    toggles: str                 # what it tries
    describe: str                # how a narrative names the suspect ("an outer CUDA graph capture ...")
    sites: tuple[str, ...]       # the scan's suspect kinds that locate it in the source
    needs_baseline: bool = False  # plan() reads the baseline run's evidence: it starts after the baseline
    # ...unless the source alone says enough to start it with the first wave (plan() is then also called with no
    # baseline, and planned again from the baseline's evidence once it has ended)
    plans_early: bool = False
    fixes: bool = True           # its variants can be fixes (a warm cache never is: the harness is cold)
    bisect: bool = True          # its removing toggle takes part in the bisector's combinations
    # How specific each toggle is, by a fragment of its label: a toggle that names the mechanism ranks
    # above a blunt one when several fix the failure alone. Unlisted toggles rank 1; rank 0 is blunt.
    ranks: dict = field(default_factory=dict)
    # Suspects this one only exists with: a blunt toggle of those (compile off) that fixes the failure
    # only removes what this suspect needs, so this suspect, not that one, names the cause.
    requires: tuple[str, ...] = ()
    # Its toggle moves work rather than removing it (deferring import work to the first call): a variant
    # that then fails the same way at a later stage has moved the failure, not fixed it.
    moves_work: bool = False
    # Whether a run shows the mechanism its toggle removes (a frame compiled, a capture made). A toggle run
    # against a baseline that never showed it had nothing to remove: it clears nothing.
    seen: Callable[[Run], bool] | None = None
    # The sampler's mechanisms (worker/sampler.py) whose time this probe's toggle addresses: a hot spot
    # inside one of them names this probe as its owner.
    mechanisms: tuple[str, ...] = ()
    # Figures this probe derives from the session's runs, as claims: (key, sentence, run ids) each.
    figures: Callable | None = None
    # What its toggle takes away, measured in the variant's run against the baseline's (analysis/effects/effects.py):
    # "lines" (the time in the statements it edits), "compile" (the compile calls' settings, recompiles),
    # "records" (the probe's own, by its `records` hook: probes/spec.py), "measure" (the probe's own measure of its
    # own evidence, by its `measure` hook), "switch". A variant is "without the suspect" only where that measure
    # shows the work gone.
    takes_away: str | None = None
    # Probes that own a statement this one would also edit (a timed loop is a search, not a warmup): where both
    # toggles act on one statement, they are one suspect, named by the owner.
    yields_to: tuple[str, ...] = ()
    # The module of its own that the worker loads into every stage's process (worker/plugins.py), for evidence
    # no built-in watcher records: it lives in the probe's package, and its events reach the probe alone, in
    # each stage's probe_facts[<probe name>].
    hook: str | None = None

