"""The `#!POPCORN` header lines a GPU MODE submission opens with: `#!POPCORN leaderboard NAME` names the
problem, `#!POPCORN gpu GPU` (or `gpus`) the GPU it is submitted for. popcorn-cli reads them; diagnose
reads them too, so that a submission finds its problem folder from its name alone.
"""
from __future__ import annotations

import re

_LINE = re.compile(r"^\s*#!\s*POPCORN\s+(\S+)\s*(.*?)\s*$", re.IGNORECASE)


def headers(source: str) -> dict:
    """{key: {"value": str, "line": int}} for each `#!POPCORN key value` line (the first of each key)."""
    out: dict[str, dict] = {}
    for n, line in enumerate(source.splitlines()[:200], 1):
        m = _LINE.match(line)
        if m and m.group(1).lower() not in out:
            out[m.group(1).lower()] = {"value": m.group(2), "line": n}
    if "gpus" in out and "gpu" not in out:
        out["gpu"] = out["gpus"]
    return out
