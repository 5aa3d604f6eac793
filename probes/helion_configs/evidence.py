"""What the helion_configs probe reads from runs: its hook's records (hook.py) in each stage's
probe_facts["helion_configs"], one per search over a kernel's listed configs."""
from __future__ import annotations

import ast

from diagnose.facts.observed import unfinished
from diagnose.session import Run

NAME = "helion_configs"


def searches(run: Run | None) -> list[dict]:
    """Every search over a configs=[...] list the run made, stage by stage (`records`)."""
    return [r for st in (run.stages if run is not None else []) if str(st.status) != "skipped"
            for r in records(st)]


def records(step) -> list[dict]:
    """One step's searches: ended ones with the config they chose, and one the process's end cut off (a start
    with no end) as open, timed up to that end."""
    facts, out = (step.probe_facts or {}).get(NAME, []), []
    ended = {(e.get("kernel"), e.get("key")) for e in facts if e.get("event") == "end"}
    for e in facts:
        rec = {k: e.get(k) for k in ("kernel", "file", "line", "key", "phase", "configs")}
        if e.get("event") == "end":
            out.append({**rec, "stage": step.name, "seconds": e.get("seconds"), "config": e.get("config"),
                        "error": e.get("error"), "done": e.get("config") is not None})
        elif e.get("event") == "start" and (rec["kernel"], rec["key"]) not in ended:
            t, end = e.get("t"), step.end_t
            out.append({**rec, "stage": step.name, "seconds": round(max(0.0, end - t), 3) if t and end else None,
                        "config": None, "error": None, "done": False})
    return out


def chosen(run: Run | None) -> dict[str, dict[tuple, dict]]:
    """kernel -> shape key -> the config its search chose, from the searches that ended."""
    out: dict[str, dict] = {}
    for r in searches(run):
        if r["done"]:
            try:
                key = ast.literal_eval(r["key"])
            except (ValueError, SyntaxError, TypeError):
                continue
            out.setdefault(r["kernel"], {})[key] = r["config"]
    return out


def took(base: Run, run: Run) -> tuple[bool, str] | None:
    """Did the toggle take the searches away? Said only where the baseline searched: a run that still searched
    a listed config at any shape did not take it, one with none did (its stages ran: a stage that never ran
    proves nothing, so it says nothing)."""
    if not searches(base) or not any(str(st.status) != "skipped" for st in run.stages):
        return None
    left = searches(run)
    if left:
        return False, (f"{run.id} still searched its configs list {len(left)} time(s) "
                       f"({sum(float(r['seconds'] or 0) for r in left):.1f} s)")
    return True, f"{run.id} searched no configs list (the baseline: {len(searches(base))} search(es))"


def story(recs: list[dict], run: Run | None) -> str:
    kernels = sorted({r["kernel"] for r in recs})
    cut = unfinished(run, recs)
    return (f"Helion compiled and benchmarked every config of {', '.join(kernels)}'s configs=[...] list "
            f"({max(int(r['configs'] or 0) for r in recs)} configs) at each new shape: {len(recs)} search(es), "
            f"{sum(float(r['seconds'] or 0) for r in recs):.1f} s{cut}")
