"""Numbers derived from one run's raw record: steady-state time, stage seconds, recompiles. Pure.

Kept apart from the bisector and the report's summaries so that probes can read them too.
"""
from __future__ import annotations

import math
import statistics

from diagnose.session import Run, StageResult
from diagnose.status import NO_EVIDENCE, Status

# the noise floor (evidence.py, the warmup probe): 5 % of the time compared, and at least 0.25 s
NOISE_REL, NOISE_ABS = 0.05, 0.25


STEADY_STAGE = "benchmark"     # the stage whose timing gives a run's steady state (the fix is chosen by it)


def steady_us(run: Run) -> dict[str, float]:
    """Median per-call microseconds per benchmark case (benchmark stage, else leaderboard). Under a problem's own
    evaluator, its report's mean per case (`benchmark.N.mean`, in nanoseconds, as reference-kernels' eval.py
    writes it): the harness's own figure, where our timing did not run."""
    for name in (STEADY_STAGE, "leaderboard"):
        st = run.stage(name)
        if st and st.timing:
            return {c: statistics.median(t["per_call_s"]) * 1e6 for c, t in st.timing.items()}
        if st and st.status == Status.OK and (got := _reported_us(st, name)):
            return got
    return {}


def _reported_us(st: StageResult, name: str) -> dict[str, float]:
    report = (st.evaluator or {}).get("report") or {}
    out = {}
    for key, value in report.items():
        if key.startswith(f"{name}.") and key.endswith(".mean"):
            case = report.get(key[: -len("mean")] + "spec", key)
            try:
                out[case] = float(value) / 1e3
            except ValueError:
                continue
    return out


def geomean(values) -> float | None:
    vals = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def stage_seconds(run: Run) -> dict[str, float]:
    """Seconds each stage took against its budget (the prediction where there is one, lock waits excluded)."""
    return {s.name: s.seconds for s in run.stages if s.status not in (Status.SKIPPED,) + NO_EVIDENCE}


def recompiles(st: StageResult) -> list[dict]:
    """Compile records whose id 'F/R' has R > 0: a recompile of frame F, with torch's stated reason."""
    out = []
    for r in st.compile:
        cid = str(r.get("compile_id") or "")
        tail = cid.split("/")[-1] if "/" in cid else "0"
        if tail.isdigit() and int(tail) > 0:
            out.append({"compile_id": cid, "phase": r.get("phase"), "reason": r.get("recompile_reason")})
    return out


def first_call(st: StageResult, spans: list[dict] = ()) -> dict | None:
    """The stage's first first_call phase, split into compiling, capturing and the rest (mostly warmup). `spans`:
    the probes' own work in the stage (analysis/verdict/summary.probe_spans), whose time in the phase is its
    capturing."""
    ph = next((p for p in st.phases if p.name.startswith("first_call:")), None)
    if ph is None:
        return None
    total = ph.seconds
    comp = sum((r.get("duration_us") or 0) / 1e6 for r in st.compile if r.get("phase") == ph.name)
    cap = sum(((c["end_s"] if c["end_s"] is not None else ph.end_s) - c["start_s"]) for c in spans
              if c.get("phase") == ph.name)
    return {"phase": ph.name, "total_s": round(total, 3), "compile_s": round(comp, 3),
            "capture_s": round(cap, 3), "rest_s": round(max(0.0, total - comp - cap), 3), "open": ph.open}
