"""The extension_build probe's facts, read back from its hook's events (hook.py) in each step's
probe_facts["extension_build"]: one record per build, in the order they ended, then the builds still running
when the step's process ended (ok None), timed up to that end."""
from __future__ import annotations

NAME = "extension_build"
KEPT = ("name", "seconds", "ok", "built", "found_lock", "sources", "cflags", "cuda_cflags", "with_cuda", "arch_list")


def step_builds(step) -> list[dict]:
    """Every build of one step (a stage, or its compile step): {name, seconds, ok, built, found_lock, ...}."""
    recs = (step.probe_facts or {}).get(NAME) or [] if step is not None else []
    done = [{k: r.get(k) for k in KEPT} for r in recs if r.get("event") == "built"]
    started = [r for r in recs if r.get("event") == "start"]
    end = step.end_t if step is not None else None
    for r in started[len(done):]:     # still building when the process ended: how long it had run
        done.append({"name": r.get("name"), "ok": None, "built": [], "found_lock": r.get("found_lock"),
                     "seconds": round(max(0.0, (end or r["t"]) - r["t"]), 3)})
    return done


def builds(run) -> list[dict]:
    """Every build the run's steps made, with the step it ran in."""
    out = []
    for st in (run.stages if run else []):
        for label, step in ((f"{st.name}: compile step", st.compile_step), (f"{st.name} stage", st)):
            out += [{**b, "step": label, "killed": step.killed, "limit_s": step.budget_s} for b in step_builds(step)]
    return out

