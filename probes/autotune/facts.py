"""The autotune probe's facts, read back from its hook's events (hook.py) in each step's probe_facts["autotune"]:
what Triton's autotuner did per (kernel, key), in the order each key was first timed. The runner keeps each
process's latest record of a key; two processes that tuned the same key (an evaluator's pool workers) sum, as
the configs they timed do. A session of schema 4 or before kept these records in StageResult.autotune: read in
as the same records (session.LIFTED)."""
from __future__ import annotations

NAME = "autotune"
KEPT = ("kernel", "line", "key", "tried", "seconds", "best", "winner", "done")
ENDED = ("configs", "tuning_s", "calls", "parts")      # said once the key's tuning ended


def _merge(t: dict, r: dict) -> None:
    """One more process's record of the same key: its configs timed add up, its ending holds."""
    t["tried"] += r.get("tried") or 0
    t["seconds"] = round(t["seconds"] + float(r.get("seconds") or 0), 4)
    best = r.get("best")
    if best is not None and (t["best"] is None or best["ms"] < t["best"]["ms"]):
        t["best"] = best
    if r.get("done"):
        t.update(done=True, winner=r.get("winner"), **{k: r.get(k) for k in ENDED})


def step_tunes(step) -> list[dict]:
    """Every (kernel, key) one step autotuned: {kernel, line, key, tried, seconds, best, winner, done}, and once
    done {configs, tuning_s, calls, parts}."""
    out: dict[tuple, dict] = {}
    for r in (step.probe_facts or {}).get(NAME) or [] if step is not None else []:
        if r.get("event") != "tuned":
            continue
        key = (r.get("kernel"), str(r.get("key")))
        if key in out:
            _merge(out[key], r)
        else:
            out[key] = {**{k: r.get(k) for k in KEPT}, **{k: r[k] for k in ENDED if k in r}}
    return list(out.values())


def tuned(run) -> list[dict]:
    """Every (kernel, key) the run autotuned, from all its stages' records."""
    return [t for st in (run.stages if run else []) if st.status != "skipped" for t in step_tunes(st)]
