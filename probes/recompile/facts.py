"""The recompile probe's facts: every recompile, those that finished (compile metrics with an id 'F/R', R > 0) and,
per stage, those that started and never finished (the deadline came while it compiled): Dynamo had named its guard
failure (its hook's "start" events in probe_facts["recompile"]; a session of schema 4 or older has them among the
stage's events, as "recompile_start"), and the stage ended before the compile landed."""
from __future__ import annotations

from diagnose.facts.measures import recompiles
from diagnose.status import Status

NAME = "recompile"
MOST = 50_000       # a count past what the runner keeps of a stage's events is no process's count (a forged one)


def _started(st) -> list[dict]:
    """Every recompile the stage started, in order: those the hook sent whole, then ({}) those it only counted."""
    facts = (st.probe_facts or {}).get(NAME) or []
    own = [r for r in facts if r.get("event") == "start"]
    counted = min(MOST, sum(r["n"] for r in facts if r.get("event") == "starts" and type(r.get("n")) is int
                            and 0 <= r["n"] <= MOST))     # per process, summed
    if not facts:
        own = [e for e in st.events if e["k"] == "recompile_start"]
    return own + [{} for _ in range(max(0, counted - len(own)))]


def recompile_records(run) -> list[dict]:
    out = []
    for st in (s for s in (run.stages if run else []) if s.status != Status.SKIPPED):
        done = recompiles(st)
        out += [{"stage": st.name, **r} for r in done]
        for e in _started(st)[len(done):]:
            out.append({"stage": st.name, "compile_id": None, "phase": None, "in_progress": True,
                        "reason": "; ".join(map(str, e.get("reasons") or [])) or None, "code": e.get("code")})
    return out
