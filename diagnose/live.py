"""The live console line: which runs are going, their stage and phase, and the elapsed time against
the stage's budget. Fed from the runner's event callbacks (several threads)."""
from __future__ import annotations

import threading
import time

from rich.table import Table
from rich.text import Text


class LiveState:
    def __init__(self, budgets: dict[str, float]):
        self.budgets = budgets
        self.lock = threading.Lock()
        self.active: dict[str, dict] = {}
        self.done: list[tuple[str, str]] = []

    def on_event(self, run, stage: str, ev: dict) -> None:
        with self.lock:
            label = str(run.role) if run.probe is None else f"{run.probe}: {run.toggle}"
            a = self.active.setdefault(run.id, {"label": label, "stage": stage, "phase": "start", "t0": time.time()})
            if a["stage"] != stage:
                a.update(stage=stage, t0=time.time(), phase="start")
            if ev["k"] == "begin":
                a["phase"] = ev["name"]

    def on_run_done(self, run) -> None:
        with self.lock:
            if run.id in self.active:
                self.done.append((self.active.pop(run.id)["label"], run.outcome))

    def __rich__(self):
        t = Table.grid(padding=(0, 2))
        with self.lock:
            for label, outcome in self.done[-6:]:
                style = "green" if outcome == "ok" else "red"
                t.add_row(Text("done", style="dim"), Text(label), Text(outcome, style=style), Text(""))
            for rid, a in self.active.items():
                el = time.time() - a["t0"]
                b = self.budgets.get(a["stage"], 0)
                t.add_row(Text(rid, style="cyan"), Text(a["label"]), Text(f"{a['stage']} · {a['phase']}"),
                          Text(f"{el:5.1f} s / {b:.0f} s", style="red" if b and el > 0.8 * b else ""))
        return t
