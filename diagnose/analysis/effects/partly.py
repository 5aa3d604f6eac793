"""What a toggle that still failed took away of the baseline's failure, in numbers: how much further its run got
in the stage where both failed, and what its probe's own records say of the work it changed. A probe whose several
edits each fail alone but each take part of the time away gets them tried together (engine/planning.py), and where
nothing fits the cause says what each edit removed and by how much (unfixed.py). Pure.
"""
from __future__ import annotations

from diagnose.analysis.effects.effect_calls import less_per_record, stage_sum
from diagnose.analysis.effects.effects import effect
from diagnose.analysis.verdict.comparison import compare, predicted_over
from diagnose.session import Run, Session
from diagnose.status import FAILURES, Compared
from probes import door

JOINED = "together: "    # a probe's edits run as one variant: "together: A + B" (the bisector's fix of causes, too)


def _ended(run: Run, stage: str) -> int | None:
    """How many phases of the stage ended before the run stopped (None where the run has no such stage)."""
    st = run.stage(stage)
    return None if st is None else sum(1 for p in st.phases if not p.open)


def further(base: Run, run: Run) -> str | None:
    """How much further the run got in the stage where the baseline failed, or None where it got no further."""
    st = base.failed_stage
    if st is None:
        return None
    b, r = _ended(base, st.name), _ended(run, st.name)
    mine = run.failed_stage
    if mine is not None and mine.name != st.name:
        return f"{run.id} got through {st.name} and failed only in {mine.name}"
    if b is None or r is None or r <= b:
        return None
    return f"{run.id} ended {r} phases of {st.name} before it stopped, {base.id} {b}"


def per_record(base: Run, run: Run, probe: str) -> str | None:
    """Where the probe counts its work in records (autotuning, builds): each record's work fell by a share, or None."""
    st = base.failed_stage
    records = door.of(probe, "records")
    if st is None or records is None or door.info(probe).takes_away != "records":
        return None
    sb, nb = stage_sum(base, {st.name}, records)
    sv, nv = stage_sum(run, {st.name}, records)
    if not less_per_record(sb, nb, sv, nv):
        return None
    words = door.value(probe, "RECORDS", "records")
    return (f"{words} took {sv / nv:.2f} s a record in {run.id} ({nv} records), {sb / nb:.2f} s in {base.id} "
            f"({nb} records)")


def part_removed(session: Session, base: Run, run: Run) -> str | None:
    """What a variant that failed as the baseline did took away, in numbers: its run got further, or its probe's
    records show less work each. None where it took nothing measurable away (or did not fail as the baseline did,
    or changed nothing)."""
    e = effect(session, base, run)
    if e.identical or e.reached is False:
        return None
    seen = compare(session, base, run)
    # a run whose own records show less of the work each time, and which did not pass, took part of it away even
    # where its solo rerun ended otherwise (a pass within the noise in one stage, at risk in the next)
    if seen not in (Compared.SAME, Compared.MOVED) and not (e.partly and _not_passed(run)):
        return None
    said = [x for x in (further(base, run), per_record(base, run, run.probe or "")) if x]
    if e.partly and not said:
        said.append(e.what)
    return "; ".join(said) or None


def _not_passed(run: Run) -> bool:
    return run.outcome in FAILURES or predicted_over(run) is not None


def what_each_took(session: Session, base: Run, runs: list[Run]) -> str:
    """`A (r1): what it took away; B (r3): ...` for the runs that took part of the failure away, or ""."""
    said = [(r, part_removed(session, base, r)) for r in runs]
    return "; ".join(f"{r.toggle} ({r.id}): {why}" for r, why in said if why)


def joined_story(session: Session, base: Run, run: Run) -> str:
    """For a probe's edits run together (engine/planning.py), a sentence saying that each alone still failed and
    what each took away; "" for any other run."""
    label = run.toggle or ""
    if not label.startswith(JOINED):
        return ""
    names = label.removeprefix(JOINED).split(" + ")
    alone = [r for r in session.runs if str(r.role) == "single" and r.probe == run.probe and r.toggle in names]
    said = what_each_took(session, base, alone)
    return f" Each of its edits alone still failed ({', '.join(f'{r.toggle}: {r.id}' for r in alone)})" + (
        f", each taking part of it away: {said}." if said else ".")
