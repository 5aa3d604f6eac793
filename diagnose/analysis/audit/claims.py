"""Claims: every statement a report makes, as a typed record naming its runs and the rules that admit it.

Takes a concluded Session; gives the list of Claims that the renderers print (they add layout, never a
statement of their own) and that the audit (audit.py) re-derives from the raw runs. A claim's `key` is
how a finding names it, so `diagnose report --audit` can say which sentence of the report is unsupported.

Kinds: verdict, figure (a stage's time against its budget), cause, cleared ("not the cause"),
inconclusive, fix, cost (the steady state of one working fix), measure (a figure a probe derives from its
runs, e.g. the warmup's seconds per iteration: probes/*.py INFO.figures; or that deriving them failed), probe
(a probe's line: where its plan stands and why, "not present" included).
"""
from __future__ import annotations

from dataclasses import dataclass

from diagnose.analysis.causes.fix_choice import FIX_TIE_REL
from diagnose.analysis.verdict import summary
from diagnose.session import Role, Session
from diagnose.status import NOT_LOOKED, Status

KINDS = {"hot_spot": "hot spot", "bug": "a bug in the code itself", "too_slow": "work too slow wherever it runs",
         "stale_lock": "a build lock left by the killed compile step", "harness_rule": "a rule of the harness's"}


@dataclass(frozen=True)
class Claim:
    key: str                  # stable name: "verdict", "cause 1", "warmup is not the cause", "fix", ...
    kind: str
    title: str                # a few words: the status, the cause's name, the probe
    text: str                 # the sentence, as every renderer prints it
    runs: tuple[str, ...]     # the runs behind it
    rules: tuple[str, ...]    # the audit rules that admit it (audit.RULES)
    detail: str = ""          # a qualifier the renderers may show beside the title (confidence, ...)


NOT_LOOKED_KEY = "the cause was not looked for"


def cause_name(c) -> str:
    return " × ".join(c.suspects) if c.suspects and c.kind == "mechanism" else \
        (KINDS.get(c.kind, c.kind) + (f" ({' × '.join(c.suspects)})" if c.suspects else ""))


def cause_key(c) -> str:
    return f"cause {c.rank}"


def cleared_key(probe: str) -> str:
    return f"{probe} is not the cause"


def _figure(m: dict, cpu: bool) -> str:
    said = f"{m['seconds']:.1f} s" + (" predicted" if m["predicted"] else "")
    if cpu:
        return f"{m['stage']} {m['measured_s']:.1f} s measured" + (f", {said}" if m["predicted"] else "")
    return f"{m['stage']} {said} of {m['budget_s']:.0f} s"


def _verdict_text(s: Session) -> str:
    v = s.verdict
    if v.status != Status.OK:
        return v.message
    # the run that passed: the baseline's, or its solo rerun's when the baseline failed only beside others
    passed = s.run(v.runs[-1]) if v.runs else s.baseline
    figures = "; ".join(_figure(m, bool(s.harness.get("cpu_only"))) for m in summary.margins(passed)) if passed else ""
    if s.harness.get("cpu_only"):
        return f"every stage passed its checks ({figures}); on a CPU these times say nothing about a GPU's budget"
    return f"every stage passed its checks within its budget ({figures})"


def _fix_text(s: Session) -> str:
    f = s.fix
    why = (f"with the best steady state of the working variants (within {FIX_TIE_REL:.0%}, the toggle that names "
           f"the mechanism is preferred)" if f.steady_us is not None else
           "chosen as the toggle of the top cause (no benchmark stage ran, so no steady state could choose)")
    return f"{f.toggle or ''} (run {f.run}) passes every check and fits every budget, {why}"


FIGURES_FAILED = "figures failed"


def _measures(s: Session) -> list[Claim]:
    """Each probe's figures. One that raises (a bug of ours) is a claim naming the probe and the error, resting
    on no run, and the others go on: a figure is never worth the report."""
    from probes import door
    out = []
    for i in door.infos():
        try:
            figures = list(i.figures(s)) if i.figures else []
        except Exception as e:  # noqa: BLE001 - contained: the report and the session must still be written
            why = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}".rstrip(": ")
            out.append(Claim(f"{i.name} {FIGURES_FAILED}", "measure", i.name,
                             f"The {i.name} probe's figures could not be derived (a bug in diagnose): {why}",
                             (), ("claim-runs",)))
            continue
        out += [Claim(key, "measure", i.name, text, tuple(runs), ("claim-runs",)) for key, text, runs in figures]
    return out


# what a sentence says is not there, or says cut work off, re-derived from the records (audit_negative.py)
NEGATIVE = ("cut-off", "mechanism-seen")


def _probes(s: Session) -> list[Claim]:
    """Each probe's line: its plan's state and why, from the baseline's (and a tuning run's) records."""
    runs = tuple(r.id for r in [s.baseline, next((x for x in s.runs if x.role == Role.TUNING), None)] if r)
    return [Claim(f"probe {p['name']}", "probe", p["name"], p.get("why") or "", runs,
                  ("claim-runs", "not-present", "cannot-pin") + NEGATIVE, str(p.get("state") or ""))
            for p in s.probes]


def failures(claims: list[Claim]) -> list[Claim]:
    """The claims that say a part of diagnose failed (a probe's figures)."""
    return [c for c in claims if c.kind == "measure" and c.key.endswith(FIGURES_FAILED)]


def derive(s: Session) -> list[Claim]:
    """Every claim of the session, in the order a report states them."""
    v, base = s.verdict, s.baseline
    out = [Claim("verdict", "verdict", str(v.status).upper(), _verdict_text(s), tuple(v.runs),
                 ("verdict-runs", "ok-finished", "prediction-range", "outside-state", "reached-submission",
                  "lost-worker", "timing-solo"),
                 "" if v.confirmed else "unconfirmed")]
    for m in summary.margins(base) if base else []:
        out.append(Claim(f"{m['stage']} time", "figure", m["stage"], _figure(m, bool(s.harness.get("cpu_only"))),
                         (base.id,), ("figure-budget",)))
    out += _measures(s) + _probes(s)
    for c in s.causes:
        conf = f"confidence {c.confidence}; " + ("changes the outcome" if c.changes_outcome else "time only") + \
            ("" if c.confirmed else ", unconfirmed")
        out.append(Claim(cause_key(c), "cause", cause_name(c), c.narrative, tuple(c.evidence),
                         ("claim-runs", "high-confirmed", "cause-fixes", "cause-interaction", "cause-all-failed",
                          "cause-unchanged", "figure-equal", "reached-submission", "lost-worker", "no-probe-claims",
                          "timing-solo") + NEGATIVE, conf))
    for c in s.cleared:
        out.append(Claim(cleared_key(c.probe), "cleared", c.probe, c.narrative, tuple(c.evidence),
                         ("claim-runs", "cleared-acted", "cleared-blamed", "cleared-site", "cleared-same",
                          "outside-state", "reached-submission", "lost-worker", "no-probe-claims"),
                         "" if c.confirmed else "unconfirmed"))
    for i in s.inconclusive:
        out.append(Claim(NOT_LOOKED_KEY if i.probe == NOT_LOOKED else f"{i.probe} is inconclusive", "inconclusive",
                         i.probe, i.reason, tuple(i.evidence), ("claim-runs", "no-probe-claims", "timing-solo")
                         + NEGATIVE))
    if s.fix:
        out.append(Claim("fix", "fix", s.fix.toggle or "", _fix_text(s), (s.fix.run,),
                         ("claim-runs", "fix-passes", "fix-cause", "figure-equal", "outside-state",
                          "reached-submission", "no-probe-claims")))
        for c in s.fix.costs:
            us = "n/a" if c.steady_us is None else f"{c.steady_us:.1f} µs"
            left = f"; {', '.join(c.not_run)} not run: the fix was chosen before it" if c.not_run else ""
            out.append(Claim(f"cost of {c.probe}: {c.toggle}", "cost", f"{c.probe}: {c.toggle}",
                             f"steady state {us} per call{left}", (c.run,),
                             ("cost-measured", "figure-equal") + (("chosen-before",) if c.not_run else ())))
    return out


def by_kind(claims: list[Claim], kind: str) -> list[Claim]:
    return [c for c in claims if c.kind == kind]


def one(claims: list[Claim], key: str) -> Claim | None:
    return next((c for c in claims if c.key == key), None)
