"""The numerics probe's facts, read back from its hook's events (hook.py) in each stage's probe_facts["numerics"]:
the first wrong output's record {case, stats, reference, submission} ({} where no check found one). A session of
schema 4 or older kept it in StageResult.numerics, which diagnose/session.py lifts into one such event."""
from __future__ import annotations

NAME = "numerics"
FIELDS = ("case", "stats", "reference", "submission")


def step_wrong(step) -> dict:
    rec = next((r for r in (step.probe_facts or {}).get(NAME) or [] if r.get("event") == "wrong"), None)
    return {k: rec.get(k) for k in FIELDS} if rec else {}
