"""What the triage cost beyond its commands, measured from its rows: when each task started and ended on its
worker (task.py stamps both) and how long its command ran. Pure.

Dask's own overhead per task is the time a worker held no command while tasks were still queued: from the
submission to its first task, and between one task's end and its next task's start. A worker idle after its last
task is not counted (nothing was left to give it), nor is the cluster's start, which is stated on its own. The
task's own wrapping (starting the command's process, reading its session into a row) is the task's time less
the command's own seconds. The span from submission to the last end is given only where every task ran on this
host: another host's clock is not this one's.
"""
from __future__ import annotations

from itertools import pairwise
from statistics import median

from diagnose.triage.rows import Row


def _ms(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s"


def _command_s(r: Row) -> float | None:
    v = r.command_s if r.command_s is not None else r.wall_s      # a row from before command_s: its wall_s
    return v if isinstance(v, (int, float)) else None


def measure(rows: list[Row], timing: dict) -> dict | None:
    """rows: this triage's own (not those a resumed triage kept); timing: {cluster_s, submitted_at, host}."""
    ran = [r for r in rows if isinstance(r.started_at, (int, float)) and isinstance(r.ended_at, (int, float))]
    if not ran:
        return None
    by_worker: dict[str, list[Row]] = {}
    for r in ran:
        by_worker.setdefault(f"{r.host}/{r.worker}", []).append(r)
    waits, firsts = [], []
    for tasks in by_worker.values():
        tasks.sort(key=lambda r: r.started_at)
        if tasks[0].host == timing.get("host") and timing.get("submitted_at"):
            firsts.append(max(0.0, tasks[0].started_at - timing["submitted_at"]))   # one clock: this host's
        waits += [max(0.0, b.started_at - a.ended_at) for a, b in pairwise(tasks)]
    wraps = [max(0.0, (r.ended_at - r.started_at) - _command_s(r)) for r in ran if _command_s(r) is not None]
    commands = sum(_command_s(r) or 0.0 for r in ran)
    # the span from submission to the last end needs one clock: only where every task ran on this host
    one_clock = timing.get("submitted_at") and all(r.host == timing.get("host") for r in ran)
    span = max(r.ended_at for r in ran) - timing["submitted_at"] if one_clock else None
    return {"tasks": len(ran), "workers": len(by_worker), "cluster_s": timing.get("cluster_s"),
            "first_s": max(firsts) if firsts else None, "between": waits, "wrap": wraps,
            "per_task_s": (sum(waits) + sum(firsts) + sum(wraps)) / len(ran), "commands_s": commands,
            "span_s": span}


def describe(m: dict | None) -> str:
    """One sentence for the table's head and the CLI's last line."""
    if not m:
        return ""
    parts = [f"{m['tasks']} task(s) on {m['workers']} worker(s)"]
    if m.get("first_s") is not None:
        parts.append(f"first task started {_ms(m['first_s'])} after submission")
    if m["between"]:
        parts.append(f"a worker waited {_ms(median(m['between']))} between tasks (median; max "
                     f"{_ms(max(m['between']))})")
    if m["wrap"]:
        parts.append(f"each task's wrapping took {_ms(median(m['wrap']))} (median)")
    busy = m["commands_s"] / (m["span_s"] * m["workers"]) if m["span_s"] else None
    out = [f"Dask's own overhead: {_ms(m['per_task_s'])} per task ({'; '.join(parts)})."]
    if m.get("cluster_s") is not None:
        out.append(f"The cluster took {m['cluster_s']:.1f} s to start (not counted above).")
    if busy:
        out.append(f"The commands ran {m['commands_s']:.0f} s in all; from submission to the last end took "
                   f"{m['span_s']:.0f} s, with the workers running a command {busy:.0%} of it (the rest: the "
                   f"overhead above, and workers with no task left while others ran).")
    return " ".join(out)
