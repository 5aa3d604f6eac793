"""The record-based measures of a toggle's effect: the submission's torch.compile calls and what the probes count
of them (recompiles), what Triton's and Helion's autotuners and a probe's own records spent, and a runtime switch's
compile time. Each compares what the baseline's record shows with the variant's. Pure.
"""
from __future__ import annotations

from diagnose.analysis.effects.effect_lines import stages_both
from diagnose.analysis.effects.effect_record import Effect
from diagnose.facts import observed
from diagnose.session import Run

WARM_SHARE = 0.15      # a warm container took at least this share of the cold compile and build time away


def _compile_signature(run: Run, keys: set[str]) -> list[str]:
    """Each compile call with the values of the keyword arguments the toggles set, in the call's own order."""
    out = []
    for c in observed.compile_calls(run):
        kw = c.get("kwargs") or {}
        out.append(f"{c.get('target')}(" + ", ".join(f"{k}={v!r}" for k, v in kw.items() if k in keys) + ")")
    return sorted(out)


def compile_effect(base: Run, run: Run, keys: set[str], counts: list) -> Effect:
    """The compile calls' settings (`keys`: the keyword arguments the probes' toggles set), and what the probes
    count in each run (`counts`: (count(run), its words) each: recompiles)."""
    b, v = _compile_signature(base, keys), _compile_signature(run, keys)
    if not b and not observed.frames_compiled(base):
        return Effect(False, False, f"{base.id} made no torch.compile call and compiled nothing")
    n = [(words, count(base), count(run)) for count, words in counts]
    what = f"compile calls {'; '.join(b) or 'none'} in {base.id}, {'; '.join(v) or 'none'} in {run.id}" + \
        "".join(f"; {words} {nb} -> {nv}" for words, nb, nv in n if nb or nv)
    return Effect(True, b != v or any(nv < nb for _, nb, nv in n), what)


def stage_sum(run: Run, names: set[str], records) -> tuple[float, int]:
    """Seconds and count of a probe's records (its `records(step)`, read from its facts) in the named stages (the
    stages both runs ran)."""
    recs = [x for st in run.stages if st.name in names for x in records(st) or []]
    return sum(float(x.get("seconds") or 0.0) for x in recs), len(recs)


def library_effect(base: Run, run: Run, records, what: str) -> Effect:
    """What a library spent (autotune, helion, a probe's records) in the stages both runs ran: a toggle that pins
    or moves it takes most of those seconds away."""
    names = {b.name for b, _ in stages_both(base, run)}
    sb, nb = stage_sum(base, names, records)
    sv, nv = stage_sum(run, names, records)
    if not nb:
        return Effect(False, False, f"{base.id} recorded no {what}")
    said = f"{what}: {nb} record(s), {sb:.1f} s in {base.id}; {nv}, {sv:.1f} s in {run.id}"
    if nv == 0 or sb - sv > max(0.25, sb / 2):
        return Effect(True, True, said)
    part = _less_each(base, run, names, records, (sb, nb, sv, nv))
    # both runs cut off by a deadline spend about the same seconds: the work each record (or each call) does, not
    # the sum, says whether the edit changed it; less of it each time is neither "unchanged" nor "taken away"
    return Effect(True, None, f"{said}; {part}", partly=True) if part else Effect(True, False, said)


PART = 0.25     # the work per record, or the records per call, fell by at least this share: part of it is gone


def less_per_record(sb: float, nb: int, sv: float, nv: int) -> bool:
    """Did each of the run's records (nv of them, sv seconds) take a share less time than the baseline's (nb, sb)?"""
    return bool(nb and nv and sb > 0 and sv / nv <= (1 - PART) * sb / nb)


def _less_each(base: Run, run: Run, names: set[str], records, sums: tuple) -> str | None:
    """Where the run's records each took a share less time, or came a share less often per call (the records'
    `calls`: the library's calls so far in that process), than the baseline's: that, in numbers; else None.
    `sums`: both runs' seconds and counts of those records in those stages, as library_effect summed them."""
    sb, nb, sv, nv = sums
    said = []
    if less_per_record(sb, nb, sv, nv):
        said.append(f"{sv / nv:.2f} s a record in {run.id}, {sb / nb:.2f} s in {base.id}")
    cb, cv = _calls(base, names, records), _calls(run, names, records)
    if cb and cv and nv / cv <= (1 - PART) * nb / cb:
        said.append(f"{nv} record(s) in {cv} calls in {run.id}, {nb} in {cb} in {base.id}")
    return "; ".join(said) or None


def _calls(run: Run, names: set[str], records) -> int:
    """The library's calls in the named stages: each stage's process counts its own (0 where records lack it)."""
    return sum(max([int(x.get("calls") or 0) for x in records(st) or []] + [0])
               for st in run.stages if st.name in names)


def switch_effect(base: Run, run: Run, saves: list) -> Effect:
    """A warm container: the compile and build seconds it should save, in the stages both ran (`saves`: the
    records, by each probe's `records`, whose time a warm container saves beside the compile calls')."""
    names = {b.name for b, _ in stages_both(base, run)}

    def cost(r: Run) -> float:
        return sum((c.get("duration_us") or 0) / 1e6 for st in r.stages if st.name in names for c in st.compile) + \
            sum(stage_sum(r, names, records)[0] for records in saves)
    b, v = cost(base), cost(run)
    if b <= 0.25:
        return Effect(None, None, f"{base.id} spent {b:.2f} s compiling and building: nothing a warm cache saves")
    # a warm cache cannot take all of it away (Dynamo traces again): a fall well past the noise is its effect
    return Effect(True, b - v > max(0.25, WARM_SHARE * b), f"compile and build time {b:.1f} s in {base.id}, "
                                                          f"{v:.1f} s in {run.id}")
