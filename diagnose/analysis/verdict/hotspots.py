"""Where the time went: each phase's samples turned into lines, seconds and shares. Pure.

A sample names the submission line the main thread was on. A line's seconds are its share of the
samples times the phase's measured duration: a loop that holds the GIL delays the sampler's own wake-ups,
so counting samples times the interval would undercount it. A line inside a loop is shown with the loop (its
header and how many times it ran, where that was
counted), so a hot spot reads "L18, a loop of 20,000 iterations, 2.4 s of the 2.5 s first call".
"""
from __future__ import annotations

from diagnose.analysis.verdict.summary import source_line
from diagnose.facts import observed
from diagnose.session import Run, Session, StageResult
from diagnose.status import Status

TOP = 5
# The library mechanisms a line's time went into (worker/sampler.py MECHANISMS) that no probe stands for, in words;
# a probe says its own (its MECHANISM_WORDS, read through the door).
GENERIC_WORDS = {
    "triton_compile": "Triton compiling a kernel",
    "inductor_compile": "Inductor compiling",
    "dynamo": "torch.compile tracing (Dynamo)",
    "cuda_init": "CUDA initialisation",
    "cuda_sync": "a wait for the GPU's work to finish (torch.cuda.synchronize)",
    "cuda_call": "torch.cuda's own code, with CUDA already initialised",
    "subprocess_wait": "waiting for a subprocess",
    "lock_wait": "waiting on a lock or another thread",
}


def owner_probe(mechanism: str | None) -> str | None:
    """The probe whose toggle addresses time spent inside this mechanism (its INFO.mechanisms)."""
    from probes import door
    return next((i.name for i in door.infos() if mechanism and mechanism in i.mechanisms), None)


def mechanism_words(mechanism: str | None) -> str:
    """A mechanism in words: its probe's, else the generic table's, else its own name."""
    from probes import door
    owner = owner_probe(mechanism)
    said = door.value(owner, "MECHANISM_WORDS", {}) if owner is not None else GENERIC_WORDS
    return said.get(mechanism or "", mechanism or "")


def mechanism_hint(mechanism: str | None) -> str:
    """What to do about time inside a probe's mechanism when no toggle was verified ("; ..."), or ""."""
    from probes import door
    owner = owner_probe(mechanism)
    return door.value(owner, "MECHANISM_HINTS", {}).get(mechanism or "", "") if owner is not None else ""


def cuda_up(session: Session, st: StageResult, phase: str) -> bool:
    """Was CUDA initialised in the process before this phase? The built-in model's worker initialises it in its
    device_init phase, and the submission runs in that same process (a problem's own evaluator may start another),
    so later time there is never CUDA's initialisation, whatever an older sampler called it."""
    if session.task.get("evaluator"):
        return False
    up = next((p for p in st.phases if p.name == "device_init" and not p.open), None)
    at = next((p for p in st.phases if p.name == phase), None)
    return up is not None and at is not None and up.end_s <= at.start_s


def _mechanisms(st: StageResult, phase: str, line: int, up: bool) -> dict[str, int]:
    """A line's samples by the library mechanism they were inside (`up`: CUDA was initialised before the phase, so
    what a sampler that named a whole file's time CUDA's initialisation saw there was torch.cuda's other code)."""
    out: dict[str, int] = {}
    for k, n in ((st.samples.get(phase) or {}).get("mechanisms") or {}).items():
        at, _, name = k.partition("|")
        if at == str(line):
            name = "cuda_call" if up and name == "cuda_init" else name
            out[name] = out.get(name, 0) + n
    return out


def mechanism(st: StageResult, phase: str, line: int, up: bool = False) -> tuple[str, float] | None:
    """The library mechanism most of a line's samples were inside, and that share of them."""
    kinds = st.samples.get(phase) or {}
    n_line = (kinds.get("lines") or {}).get(str(line), 0)
    mech = _mechanisms(st, phase, line, up)
    if not n_line or not mech:
        return None
    name, n = max(mech.items(), key=lambda kv: kv[1])
    return (name, round(n / n_line, 3)) if n / n_line >= 0.5 else None


def where(session: Session, st: StageResult, phase: str) -> list[dict]:
    """The hottest submission lines of one phase: line, code, seconds, share, and the loop around it."""
    kinds = st.samples.get(phase) or {}
    lines = {int(k): v for k, v in kinds.get("lines", {}).items()}
    total = sum(lines.values())
    if not total:
        return []
    ph = next((p for p in st.phases if p.name == phase), None)
    duration = ph.seconds if ph else total * (st.sample_interval_s or 0.01)
    loops = observed.loops(session.submission.get("source") or "")
    iters = {int(k): v for k, v in (st.loops.get(phase) or {}).items()}
    rows = []
    for line, n in sorted(lines.items(), key=lambda kv: -kv[1])[:TOP]:
        loop = min((lp for lp in loops if lp[0] <= line <= lp[1]), key=lambda lp: lp[1] - lp[0], default=None)
        mech = mechanism(st, phase, line, cuda_up(session, st, phase))
        rows.append({"line": line, "code": source_line(session, line), "seconds": round(n / total * duration, 3),
                     "share": round(n / total, 3), "loop": loop[0] if loop else None,
                     "iterations": iters.get(loop[0]) if loop else None,
                     "mechanism": mech[0] if mech else None, "mechanism_share": mech[1] if mech else None})
    return rows


def phases_to_explain(run: Run) -> list[tuple[StageResult, str]]:
    """The failing phase, and any phase that took a notable part of its stage's budget."""
    out = []
    for st in run.stages:
        if st.status == Status.SKIPPED:
            continue
        for p in st.phases:
            if p.name in ("torch_import", "device_init", "reference_import") or not st.samples.get(p.name):
                continue
            failing = st.phase == p.name and st.status != Status.OK
            if failing or (st.budget_s and p.seconds >= 0.2 * st.budget_s):
                out.append((st, p.name))
    return out


def _line_in(session: Session, st: StageResult, phase: str, line: int) -> tuple[float, dict]:
    """A line's seconds in one phase (its share of the samples times the phase's duration), and the library
    mechanisms its samples were inside (mechanism -> samples)."""
    kinds = st.samples.get(phase) or {}
    lines = kinds.get("lines") or {}
    total = sum(lines.values())
    ph = next((p for p in st.phases if p.name == phase), None)
    if not total or ph is None:
        return 0.0, {}
    return lines.get(str(line), 0) / total * ph.seconds, _mechanisms(st, phase, line, cuda_up(session, st, phase))


def _over_first_calls(session: Session, st: StageResult, top: dict) -> dict | None:
    """Work that runs at every new shape (a search, a tuning) is paid in each first call: the failing one is
    only the slice the deadline cut off. The line's seconds summed over every first call of the stage."""
    phases = [p.name for p in st.phases if p.name.startswith("first_call:") and st.samples.get(p.name)]
    if len(phases) < 2:
        return None
    seconds, mech = 0.0, {}
    for name in phases:
        sec, m = _line_in(session, st, name, top["line"])
        seconds += sec
        for k, n in m.items():
            mech[k] = mech.get(k, 0) + n
    spent = [name for name in phases if _line_in(session, st, name, top["line"])[0] > 0]
    if len(spent) < 2:
        return None
    main = max(mech.items(), key=lambda kv: kv[1]) if mech else None
    return {"seconds": round(seconds, 3), "calls": len(spent),
            "mechanism": main[0] if main and main[1] >= 0.5 * sum(mech.values()) else None}


def hot_spot(session: Session, base: Run) -> dict | None:
    """The measured hot spot of the baseline's failure: the hottest line of the phase it failed in, with what
    the same line cost over every first call of the stage where it ran in several."""
    st = base.failed_stage
    if st is None or not st.phase:
        return None
    rows = where(session, st, st.phase)
    if not rows:
        return None
    top = rows[0]
    phase = next((p for p in st.phases if p.name == st.phase), None)
    out = {**top, "stage": st.name, "phase": st.phase, "phase_s": round(phase.seconds, 2) if phase else None,
           "budget_s": st.budget_s}
    over = _over_first_calls(session, st, top) if st.phase.startswith("first_call:") else None
    if over:
        out["over_first_calls"] = over
        if not out["mechanism"] and over["mechanism"]:     # what the line did across the calls names it
            out["mechanism"], out["mechanism_share"] = over["mechanism"], None
    return out


def describe(h: dict) -> str:
    what = f"L{h['line']}"
    if h.get("loop"):
        it = f" of {h['iterations']:,} iterations" if h.get("iterations") else ""
        what += f", in the loop at L{h['loop']}{it},"
    inside = ""
    if h.get("mechanism"):
        share = f" ({h['mechanism_share']:.0%} of that line's samples)" if h.get("mechanism_share") else \
            " (most of that line's samples over its first calls)"
        inside = f", inside {mechanism_words(h['mechanism'])}{share}"
    over = h.get("over_first_calls")
    total = (f"; over the {over['calls']} first calls of {h['stage']} it ran in, {over['seconds']:.1f} s in all "
             f"(work paid again at every new shape)") if over else ""
    return (f"{what} took {h['seconds']:.1f} s ({h['share']:.0%} of the samples) of the {h['phase_s']:.1f} s "
            f"{h['phase']} in {h['stage']}{inside}{total}")
