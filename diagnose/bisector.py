"""Combine the baseline and the probe runs into ranked causes and a verified fix.

Pure: it reads runs and, to search interactions, calls `fails(keep) -> bool` ("with only these suspects
left in, does the failure come back?"), which the engine answers by running a combined variant.

Ranking: changing the outcome comes before saving time; more time saved before less. A time difference
is claimed only when it is larger than the measured spread (or, with one sample, than a floor of 5 % and
0.25 s): CPU and GPU hosts are noisy, and an invented cause costs the user more than a missed one.
"""
from __future__ import annotations

import math
import statistics

from diagnose.session import FAILURES, Run, Session

NOISE_REL, NOISE_ABS = 0.05, 0.25
ORDER = ["graph_capture", "compile_mode", "recompile", "fullgraph", "warmup", "import_init", "cache"]
WORDS = {"crash": "the crash", "timeout": "the timeout", "wrong": "the wrong result", "at_risk": "the budget risk"}
DESCRIBE = {
    "graph_capture": "an outer CUDA graph capture around a compiled function",
    "compile_mode": "torch.compile (its mode, or compiling at all)",
    "recompile": "recompiling for every new shape",
    "fullgraph": "fullgraph=True",
    "warmup": "the warmup iteration count",
    "import_init": "work done at import",
    "cache": "a cold compile cache",
}


def ddmin(features: list[str], fails, prefetch=None) -> list[str]:
    """Zeller's delta debugging: a 1-minimal subset of `features` for which fails(subset) holds.

    `prefetch(subsets)`, when given, may evaluate every test of a round at once (in parallel); the
    search itself stays sequential and reads the answers back through `fails`."""
    c, n = list(features), 2
    while len(c) >= 2:
        size = math.ceil(len(c) / n)
        chunks = [c[i:i + size] for i in range(0, len(c), size)]
        if prefetch:
            prefetch(chunks + ([[x for x in c if x not in ch] for ch in chunks] if len(chunks) > 2 else []))
        for ch in chunks:
            if fails(ch):
                c, n = ch, 2
                break
        else:
            for ch in chunks:
                comp = [x for x in c if x not in ch]
                if len(chunks) > 2 and fails(comp):
                    c, n = comp, max(n - 1, 2)
                    break
            else:
                if n >= len(c):
                    break
                n = min(len(c), 2 * n)
    return c


# -- measurements derived from runs -------------------------------------------------------------------

def steady_us(run: Run) -> dict[str, float]:
    """Median per-call microseconds per benchmark case (benchmark stage, else leaderboard)."""
    for name in ("benchmark", "leaderboard"):
        st = run.stage(name)
        if st and st.timing:
            return {c: statistics.median(t["per_call_s"]) * 1e6 for c, t in st.timing.items()}
    return {}


def geomean(values) -> float | None:
    vals = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def stage_seconds(run: Run) -> dict[str, float]:
    """Seconds each stage took or is predicted to take (the prediction where there is one)."""
    return {s.name: (s.predicted_s if s.predicted_s is not None else s.wall_s) for s in run.stages
            if s.status not in ("skipped",)}


def _same_variant(session: Session, run: Run) -> list[Run]:
    return [r for r in session.runs if r.source_sha == run.source_sha and r.switches.get("warm_cache") ==
            run.switches.get("warm_cache")]


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) if len(values) > 1 else 0.0


def seconds_saved(session: Session, base: Run, run: Run) -> dict[str, dict]:
    """Per stage: median seconds saved, the noise it must beat, and the budget; only stages where the
    baseline got at least as far as the variant."""
    out = {}
    bases, variants = _same_variant(session, base), _same_variant(session, run)
    for st in run.stages:
        b = base.stage(st.name)
        if not b or b.status == "skipped" or st.status == "skipped":
            continue
        bv = [stage_seconds(r).get(st.name) for r in bases]
        vv = [stage_seconds(r).get(st.name) for r in variants]
        bv, vv = [x for x in bv if x is not None], [x for x in vv if x is not None]
        if not bv or not vv:
            continue
        saved = statistics.median(bv) - statistics.median(vv)
        noise = max(_spread(bv) + _spread(vv), NOISE_REL * statistics.median(bv), NOISE_ABS)
        out[st.name] = {"saved_s": round(saved, 3), "noise_s": round(noise, 3), "budget_s": st.budget_s,
                        "claimed": abs(saved) > noise, "samples": [len(bv), len(vv)]}
    return out


# -- the analysis ---------------------------------------------------------------------------------------

def _site(session: Session, probe: str) -> dict | None:
    suspect = {"graph_capture": "capture", "compile_mode": "compile", "fullgraph": "compile",
               "recompile": "compile", "warmup": "warmup", "import_init": "import_init",
               "cache": "compile"}.get(probe)
    hit = next((s for s in session.scan if s["suspect"] == suspect), None)
    return {"file": session.submission.get("path"), "line": hit["line"], "code": hit["code"]} if hit else None


def _singles(session: Session) -> list[Run]:
    return [r for r in session.runs if r.probe and not r.switches.get("combination")
            and not r.switches.get("repeat") and "+" not in r.probe]


def analyze(session: Session, removers: list[str], fails, prefetch=None) -> None:
    """Fill session.causes, session.cleared (suspects verified not to matter) and session.fix."""
    base = session.baseline
    session.causes, session.fix = [], None
    session.cleared = []
    if base is None or not base.stages:
        return
    singles = _singles(session)
    failing = base.outcome in FAILURES or base.outcome == "at_risk"
    causes: list[dict] = []
    # A fixer takes the failure away: a crash that became 'at_risk' is fixed, though not yet a fix.
    fixed = ("ok",) if base.outcome == "at_risk" else ("ok", "at_risk")
    fixers = [r for r in singles if r.outcome in fixed and not r.switches.get("warm_cache")] if failing else []
    fixing_probes = sorted({r.probe for r in fixers}, key=ORDER.index)
    minimal: list[str] = []
    if failing:
        if fails and removers and (len(fixing_probes) >= 2 or not fixing_probes):
            ordered = sorted(removers, key=ORDER.index)
            known = [p for p in fixing_probes if p in ordered]
            # Each suspect whose removal alone fixes the failure is necessary. So when the failure still
            # comes back with only those left in, they are the minimal set, and one round settles it;
            # otherwise delta debugging searches all of them. Both ends are checked first: with every
            # suspect in it must fail (the baseline, unless flaky), with every suspect out it must not.
            if prefetch:
                prefetch([ordered, [], known] if known else [ordered, []])
            if fails(ordered) and not fails([]):
                minimal = known if known and fails(known) else ddmin(ordered, fails, prefetch)
        elif len(fixing_probes) == 1:
            minimal = fixing_probes
        if minimal:
            causes.append(_outcome_cause(session, base, minimal, fixers))
        elif base.outcome in FAILURES and singles:
            causes.append(_unfixed_cause(session, base))
    # Time savers: runs that kept or reached 'ok' and saved more than the noise somewhere. A healthy
    # submission gets none: saving time it does not need is not a cause.
    for r in (singles if failing else []):
        if r.probe in minimal or r.outcome != "ok" or r.switches.get("warm_cache") or failing and r in fixers:
            continue
        saved = seconds_saved(session, base, r)
        best = max((v["saved_s"] for v in saved.values() if v["claimed"]), default=0.0)
        if best > 0:
            causes.append({"suspects": [r.probe], "site": _site(session, r.probe), "changes_outcome": False,
                           "seconds_saved": saved, "evidence": [base.id, r.id], "confidence": "medium",
                           "toggle": r.toggle, "narrative": f"{r.toggle} saves {best:.1f} s "
                           f"({', '.join(k for k, v in saved.items() if v['claimed'])}) without changing the outcome."})
    causes.sort(key=lambda c: (not c["changes_outcome"],
                               -max([v["saved_s"] for v in c["seconds_saved"].values() if v["claimed"]] or [0])))
    for i, c in enumerate(causes, 1):
        c["rank"] = i
    session.causes = causes
    session.cleared = _cleared(session, base, singles, minimal, failing)
    session.fix = _fix(session, base)


def _describe(probe: str, fixers: list[Run]) -> str:
    """Name the suspect by what its fixing toggles show: dropping only the CUDA graphs of the mode fixed
    it, so the mode's own CUDA graphs are the suspect, not compiling as such."""
    labels = {r.toggle for r in fixers if r.probe == probe}
    if probe == "compile_mode" and any("no CUDA graphs" in t or "no-cudagraphs" in t for t in labels):
        return "a compile mode that records its own CUDA graphs (max-autotune, reduce-overhead)"
    return DESCRIBE[probe]


def _outcome_cause(session: Session, base: Run, minimal: list[str], fixers: list[Run]) -> dict:
    what = WORDS.get(base.outcome, base.outcome)
    by = {p: [r for r in fixers if r.probe == p] for p in minimal}
    fixed_by = [r.toggle for p in minimal for r in by[p]]
    if len(minimal) > 1:
        narrative = (f"{what.capitalize()} needs all of: " + " × ".join(_describe(p, fixers) for p in minimal) +
                     f". Taking away any one of them fixes it ({'; '.join(fixed_by) or 'verified by the combination runs'}).")
    else:
        d = _describe(minimal[0], fixers)
        narrative = f"{d[0].upper() + d[1:]} causes {what}: " + \
                    (f"{'; '.join(fixed_by)} fixes it." if fixed_by else "removing it fixes it.")
    best = min(fixers, key=lambda r: geomean(steady_us(r).values()) or math.inf, default=None)
    consistent = all(r.outcome == base.outcome for r in _same_variant(session, base))
    return {"suspects": minimal, "site": _site(session, minimal[0]),
            "sites": [s for s in (_site(session, p) for p in minimal) if s], "changes_outcome": True,
            "seconds_saved": seconds_saved(session, base, best) if best else {},
            "evidence": [base.id] + [r.id for r in fixers if r.probe in minimal] +
                        [r.id for r in session.runs if r.switches.get("combination")],
            "confidence": "high" if consistent and fixed_by else "medium", "narrative": narrative}


def _unfixed_cause(session: Session, base: Run) -> dict:
    st = base.failed_stage
    site = st.site
    in_suspect = None
    if site:
        for s in session.scan:
            if s["line"] <= site["line"] <= s["end_line"]:
                in_suspect = s
    moved = next((r for r in _singles(session) if r.probe == "import_init"), None)
    if st.status == "timeout" and in_suspect and in_suspect["suspect"] == "import_init" or (
            moved and moved.outcome == st.status and st.phase == "submission_import"):
        sec = st.phase_s("submission_import")
        narrative = (f"The work itself is too slow: {sec:.1f} s at import (line {site['line'] if site else '?'}), "
                     f"and deferring it only moves it to the first call" +
                     (f" ({moved.id}: {moved.outcome})." if moved else "."))
        return {"suspects": ["import_init"], "site": _site(session, "import_init"), "changes_outcome": False,
                "seconds_saved": {}, "evidence": [base.id] + ([moved.id] if moved else []),
                "confidence": "medium", "narrative": narrative}
    where = f"{site['file']}:{site['line']}" if site else (st.phase or "start-up")
    kind = "hangs" if st.status == "timeout" else f"fails ({st.status})"
    return {"suspects": [in_suspect["suspect"]] if in_suspect else [], "site": site, "changes_outcome": False,
            "seconds_saved": {}, "evidence": [base.id], "confidence": "high" if site else "medium",
            "narrative": f"The submission {kind} at {where} in {st.name}/{st.phase}; no probe toggle "
                         f"and no combination of them changed that: the cause is in that code itself."}


def _cleared(session: Session, base: Run, singles: list[Run], minimal: list[str], failing: bool) -> list[dict]:
    out = []
    for probe in sorted({r.probe for r in singles} - set(minimal), key=ORDER.index):
        runs = [r for r in singles if r.probe == probe]
        if failing and all(r.outcome == base.outcome for r in runs):
            out.append({"probe": probe, "toggles": [r.toggle for r in runs], "outcome": base.outcome,
                        "narrative": f"{', '.join(r.toggle for r in runs)}: still {base.outcome} — "
                                     f"{DESCRIBE[probe]} is not the cause."})
    return out


def _fix(session: Session, base: Run) -> dict | None:
    if base.outcome == "ok":
        return None
    # A fix must have gone through every stage the baseline was given (a bisector run that stopped at the
    # failing stage has not shown that it fits the later budgets).
    wanted = [s.name for s in base.stages]
    good = [r for r in session.runs if r.outcome == "ok" and r.variant and not r.switches.get("warm_cache")
            and [s.name for s in r.stages] == wanted and all(s.status == "ok" for s in r.stages)]
    if not good:
        return None
    scored = [(geomean(steady_us(r).values()) or math.inf, r) for r in good]
    scored.sort(key=lambda x: x[0])
    best_us, best = scored[0]
    seen, costs = set(), []
    for us, r in scored:
        if r.source_sha in seen:
            continue
        seen.add(r.source_sha)
        costs.append({"run": r.id, "toggle": r.toggle, "probe": r.probe,
                      "steady_us": round(us, 2) if us != math.inf else None,
                      "per_case_us": {k: round(v, 2) for k, v in steady_us(r).items()},
                      "delta_us": round(us - best_us, 2) if us != math.inf else None})
    return {"diff": best.variant, "steady_us": round(best_us, 2) if best_us != math.inf else None,
            "run": best.id, "toggle": best.toggle, "probe": best.probe, "costs": costs}
