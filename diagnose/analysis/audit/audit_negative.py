"""Rules for what a sentence says is not there, or says cut work off: each is re-derived from the records the
sentence was written from, and refused where they show it false. Pure: each finding is (rule, claim, missing),
which audit.py reports with the others.

not-present, cannot-pin: a probe's own line ("search: not present: ...", "cannot pin ...: no place of the module
                took a value the searches timed ...") against its hook's records: its `negatives` (probes/spec.py)
cut-off         "cut off by the deadline" needs a stage of the baseline that its deadline stopped: a search that
                raised, a crash or a dead pool worker cut nothing off by a deadline
mechanism-seen  "inside CUDA initialisation" needs a baseline phase sampled inside CUDA's initialisation where CUDA
                was not yet up in its process (hotspots.cuda_up: the built-in model's worker initialises it first)
"""
from __future__ import annotations

from diagnose.analysis.audit.claims import Claim
from diagnose.analysis.verdict.hotspots import GENERIC_WORDS, cuda_up
from diagnose.facts.observed import deadline_cut
from diagnose.session import Run, Session

RULES = ("not-present", "cannot-pin", "cut-off", "mechanism-seen")
DEADLINE = "cut off by the deadline"
CUDA_INIT = f"inside {GENERIC_WORDS['cuda_init']}"


def _init_seen(s: Session, base: Run | None) -> bool:
    """Some phase of the baseline was sampled inside CUDA's initialisation before CUDA was up in its process."""
    return any(k.endswith("|cuda_init") and not cuda_up(s, st, phase)
               for st in (base.stages if base else []) for phase, kinds in st.samples.items()
               for k in (kinds.get("mechanisms") or {}))


def _probe_line(s: Session, c: Claim) -> list[tuple[str, str, str]]:
    from probes import door
    hook = door.of(c.title, "negatives")
    line = next((p for p in s.probes if p.get("name") == c.title), None)
    return [(rule, c.key, missing) for rule, missing in hook(s, line)] if hook and line else []


def negatives(s: Session, claims: list[Claim]) -> list[tuple[str, str, str]]:
    base, out = s.baseline, []
    ended = "; ".join(f"{st.name} ended {st.status}" for st in (base.stages if base else [])
                      if str(st.status) != "skipped") or "no stage ran"
    for c in claims:
        if c.kind == "probe":
            out += _probe_line(s, c)
        if DEADLINE in c.text and not any(deadline_cut(st) for st in (base.stages if base else [])):
            out.append(("cut-off", c.key, f"no stage of the baseline was stopped by its deadline ({ended})"))
        if CUDA_INIT in c.text and not _init_seen(s, base):
            out.append(("mechanism-seen", c.key, "no phase of the baseline was sampled inside CUDA's initialisation "
                                                 "before CUDA was up in its process (its device_init initialised it)"))
    return out
