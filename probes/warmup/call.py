"""A warmup loop whose count is computed by a call: `for _ in range(_warmup_steps(r1, r2)):`. Cutting the count
(`range(1)`) takes away two things, the passes and the call, and a run of that edit alone cannot say which one
cost. So the warmup probe runs them apart: the count cut with the call still made (its value discarded), and the
call gone with the count kept at what the call returns. The cause names whichever the runs show, and the story
below says which runs show it, with the time the baseline spent in the count's line (the call's own work: a loop's
header line holds its count expression, its passes run on the lines below).
"""
from __future__ import annotations

import re
from functools import partial

from diagnose.facts import observed
from diagnose.facts.count_calls import count_calls, returns_int
from diagnose.facts.measures import NOISE_ABS
from diagnose.session import Role, Run
from diagnose.source.scan import scan_source
from diagnose.status import NO_EVIDENCE, Status
from probes.base import Toggle
from probes.warmup.find import find as find_loops

STILL, GONE, BOTH = "still called", "not called", "dropping"
_CALL = re.compile(r"`([^`]+)`")


def calls(source: str, baseline: Run | None, lines) -> dict[int, list[dict]]:
    """The loops (by header line) whose range() count holds a call worth separating from the count: a call into
    the file's own functions, or any call where the baseline spent measurable time on the header's line."""
    out = {}
    for ln in lines:
        seconds = sum(sec for _, sec, _ in observed.line_seconds(baseline, ln))
        found = [dict(c, seconds=round(seconds, 2)) for c in count_calls(source, ln)
                 if c["own"] or seconds >= NOISE_ABS]
        if found:
            out[ln] = found
    return out


def _kept_count(source: str, found: dict[int, list[dict]]) -> tuple[int, str]:
    """The count to keep once the call is gone: what the call returns where its function always returns one
    whole number and the count is that call alone; else 3 passes, said as such."""
    loops, values = scan_source(source, finders=[find_loops]).loops, set()
    for ln, cs in found.items():
        text = (loops.get(ln) or {}).get("count_text")
        values.add(returns_int(source, cs[0]["callee"]) if len(cs) == 1 and text == cs[0]["text"] else None)
    v = values.pop() if len(values) == 1 else None
    return (v, f"kept at {v}") if isinstance(v, int) and v > 1 else (3, "->3")


def toggles(source: str, found: dict[int, list[dict]], headers: tuple[str, ...], set_count) -> tuple[list, dict]:
    """The three edits of a count with a call: both taken away (the bisector's remover), the count alone (the
    call still made), the call alone (the count kept); and what the plan records of them."""
    named = ", ".join(f"`{c['text']}`" for cs in found.values() for c in cs)
    src = source.splitlines()
    call_headers = tuple(src[ln - 1].strip() for ln in sorted(found))
    k, kept = _kept_count(source, found)
    out = [Toggle("warmup", f"warmup N->1, {BOTH} {named}", partial(set_count, n=1, headers=headers), removes=True),
           Toggle("warmup", f"warmup N->1, {named} {STILL}", partial(set_count, n=1, headers=headers, keep=True)),
           Toggle("warmup", f"{named} {GONE}, warmup N {kept}", partial(set_count, n=k, headers=call_headers))]
    return out, {"calls": {ln: cs for ln, cs in found.items()}, "kept_count": k, "kept": kept}


def _name(labels: list[str]) -> str | None:
    return next((m.group(1) for t in labels for m in [_CALL.search(t)] if m), None)


def describe(fixing: list[str]) -> str | None:
    """The suspect, as the fixing toggles separate it (None where no count with a call was run apart)."""
    call = _name(fixing)
    if call is None:
        return None
    alone, count = any(GONE in t for t in fixing), any(STILL in t for t in fixing)
    if alone and count:
        return f"either the warmup iteration count or the call `{call}` in it (each taken away alone got past it)"
    if alone:
        return f"the call `{call}` in the warmup loop's count"
    if count:
        return f"the warmup iteration count (with `{call}` still called)"
    return f"one edit of the warmup loop's count that took away two things (the count and the call `{call}` in it)"


def _ended(r: Run | None) -> str:
    return f"{r.id} ended {r.outcome}" if r is not None else "no run"


def story(session, base: Run) -> str | None:
    """What the runs that took the count and its call apart show, with the baseline's time in the count's line."""
    probe = next((p for p in session.probes if p["name"] == "warmup"), None)
    found = ((probe or {}).get("evidence") or {}).get("calls")
    runs = [r for r in session.runs if r.role == Role.SINGLE and r.probe == "warmup"]
    if not found:
        return None
    ln = int(next(iter(found)))
    call = found[next(iter(found))][0]["text"]
    per = observed.line_seconds(base, ln)
    ended = [sec for _, sec, done in per if done]
    count = next((r for r in runs if STILL in (r.toggle or "")), None)
    alone = next((r for r in runs if GONE in (r.toggle or "")), None)
    held = f"held {sum(sec for _, sec, _ in per):.1f} s of {base.id}'s first calls" + (
        f" ({max(ended):.1f} s a shape)" if ended else " (each cut off by its deadline)") if per else \
        f"held no sampled moment of {base.id}'s first calls"
    out = f"`{call}` at L{ln} {held}."
    decided = [r for r in (count, alone) if r is not None and r.outcome not in NO_EVIDENCE]
    if len(decided) < 2:
        return out + (f" One edit took away two things, the count and the call, and no run took them apart "
                      f"({_ended(count)} with the call kept, {_ended(alone)} without it).")
    passed = {r.id: r.outcome == Status.OK for r in decided}
    k = probe["evidence"].get("kept_count")
    kept = f"the count kept at {k}" if str(probe["evidence"].get("kept", "")).startswith("kept") else f"{k} passes"
    seen = f" Run apart: with the call kept and one pass, {_ended(count)}; without the call, {kept}, {_ended(alone)}"
    verdict = {(False, True): "the call costs, not the count", (True, False): "the count costs, not the call",
               (True, True): "either alone is enough", (False, False): "neither alone: only both together"}
    return out + seen + f": {verdict[(passed[count.id], passed[alone.id])]}."
