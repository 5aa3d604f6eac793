"""Rules about what probes' toggles can show. Pure: each finding is (rule, claim, missing), which audit.py reports
with the others.

no-probe-claims: a session that ran no probe (analysis/causes/not_looked.py) says nothing of what probes found or
cleared, and only such a session says its cause was not looked for.
untaken: a toggle whose own run shows its suspect's work still done (a search pin that did not take) took nothing
away, so no cause rests on its run having failed: not "too slow wherever it runs", not "the cause is in that code
itself". (Fixes and clearings on such a run are fix-credit's and cleared-effect's: effects.py measures the same.)"""
from __future__ import annotations

from diagnose.analysis.audit.claims import NOT_LOOKED_KEY, Claim, cause_key
from diagnose.analysis.causes.not_looked import looked
from diagnose.analysis.effects.effects import effect
from diagnose.analysis.verdict.comparison import single_runs
from diagnose.session import Session
from diagnose.status import NOT_LOOKED, UNEXPLAINED

# What only probes could have found: what they found or not, what their toggles did, a conclusion resting on that
FOUND_BY_PROBES = ("no probe found", "no probe toggle", "the strategies tried", "no strategy tried",
                   "no suspect the probes know", "the cause is in that code itself", "fixes it", "combination run")
# Cause kinds that rest on toggles: a probe's suspect shown by its toggle, and "too slow wherever it runs"
TOGGLED_KINDS = ("mechanism", "too_slow")


def no_probe_claims(s: Session, claims: list[Claim]) -> list[tuple[str, str, str]]:
    rule = "no-probe-claims"
    if looked(s):
        return [(rule, c.key, "it says its cause was not looked for, yet probes ran") for c in claims
                if c.key == NOT_LOOKED_KEY]
    out = []
    kinds = {f"cause {c.rank}": str(c.kind) for c in s.causes}
    for c in claims:
        said = next((w for w in FOUND_BY_PROBES if w in c.text.lower()), None)
        if c.kind in ("cleared", "fix", "cost"):
            out.append((rule, c.key, "no probe ran, so no toggle cleared or fixed anything"))
        elif c.kind == "cause" and kinds.get(c.key) in TOGGLED_KINDS:
            out.append((rule, c.key, f"a {kinds[c.key]} cause rests on toggles, and no probe ran"))
        elif c.kind == "inconclusive" and c.title not in (NOT_LOOKED, UNEXPLAINED):
            out.append((rule, c.key, f"no probe ran, so the {c.title} probe left nothing inconclusive"))
        elif c.kind in ("cause", "inconclusive") and said:
            out.append((rule, c.key, f"it says '{said}', but no probe ran"))
    return out


def untaken(s: Session) -> list[tuple[str, str, str]]:
    base = s.baseline
    if base is None:
        return []
    idle = []
    for r in single_runs(s):
        e = effect(s, base, r)
        if e.untaken:
            idle.append(f"{r.id} ({e.why_not()})")
    if not idle:
        return []
    return [("untaken", cause_key(c), f"it rests on toggles that failed, but {idle[0]}: its run took nothing away")
            for c in s.causes if str(c.kind) == "too_slow" or "the cause is in that code itself" in c.narrative]
