"""When the user sees the verdict and the causes, read off the CLI's own lines as they are printed.

  python3 tests/perf/early.py [LABEL=ENV,ENV ...]

A cold run of Round 9 first and last; between them one diagnosis per label, each stopped (SIGINT, as a
user's Ctrl-C) once its causes line is printed. Each label may set environment variables (NAME:VALUE,
comma-separated) for its diagnosis. Results go to $OUT/early.json and, as JSON, to stdout.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import ROUND9, baseline_phases, timed  # noqa: E402


def watched(args: list[str], env: dict, stop_on: str | None) -> dict:
    """The command's wall, the wall at which its verdict and causes lines were printed, and its baseline."""
    t, rc, out, lines = timed(args, timeout=330, env=env, stop_on=stop_on)
    seen = {f"{k}_line_s": v for k, v in lines.items()} | {"wall": round(t, 1), "rc": rc}
    try:
        s = json.loads((out / "session.json").read_text())
        seen["baseline_phases"] = baseline_phases(s)
        seen["verdict_at_s"], seen["cause_at_s"] = s.get("verdict_at_s"), s.get("cause_at_s")
        seen["verdict"] = s["verdict"]["status"]
        seen["top_cause"] = s["causes"][0]["suspects"] if s.get("causes") else None
    except (OSError, ValueError, KeyError, TypeError) as e:
        seen["error"] = repr(e)
    time.sleep(3)    # what the stopped diagnosis left on the GPU is gone before the next one
    return seen


def main(labels: list[str]) -> None:
    res: dict = {"cold": watched(["run", str(ROUND9), "--probes", "none"], {}, None)}
    print("cold", json.dumps(res["cold"]), flush=True)
    for label in labels:
        name, _, sets = label.partition("=")
        env = dict(kv.split(":", 1) for kv in sets.split(",") if kv)
        r = res[name] = watched(["run", str(ROUND9)], env, "causes")
        print(name, json.dumps(r), flush=True)
    res["cold_2"] = watched(["run", str(ROUND9), "--probes", "none"], {}, None)
    mean = (res["cold"]["wall"] + res["cold_2"]["wall"]) / 2
    for label in labels:
        r = res[label.partition("=")[0]]
        for what in ("verdict", "causes"):
            t = r.get(f"{what}_line_s")
            if t is not None:
                r[f"{what}_ratio"] = round(t / res["cold"]["wall"], 2)
                r[f"{what}_ratio_vs_mean_cold"] = round(t / mean, 2)
    (Path(os.environ.get("OUT", ".")) / "early.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
