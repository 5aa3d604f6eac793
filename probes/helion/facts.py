"""The helion probe's facts, read back from its hook's events (hook.py) in each stage's probe_facts["helion"]:
each search for a config {kernel, line, shape, case, seconds, config, error, done}, in the order they ended,
then those the process's end cut off (done False), timed up to that end."""
from __future__ import annotations

NAME = "helion"
WHO = ("kernel", "line", "shape", "case")


def step_searches(step) -> list[dict]:
    out, open_ = [], []
    for r in (step.probe_facts or {}).get(NAME) or []:
        rec = {k: (str(r.get(k)) if k == "shape" else r.get(k)) for k in WHO}
        if r.get("event") == "start":
            open_.append({**rec, "t": r.get("t")})
            continue
        open_ = [o for o in open_ if (o["kernel"], o["shape"]) != (rec["kernel"], rec["shape"])]
        out.append({**rec, "seconds": r.get("seconds"), "config": r.get("config"), "error": r.get("error"),
                    "done": r.get("done", r.get("config") is not None)})
    end = step.end_t
    return out + [{**{k: v for k, v in o.items() if k != "t"},
                   "seconds": round(max(0.0, (end or o["t"]) - o["t"]), 3), "config": None, "error": None,
                   "done": False} for o in open_ if o["t"] is not None]
