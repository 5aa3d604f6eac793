"""What a run's jail (runs/jail.py) costs a step: the same child started N times with the jail and N times
without, interleaved, in one process, so the machine's noise falls on both alike. A step here is the smallest
the runner starts: a Python that prints one line (the worker adds its own startup on top, the same either way).

    python tests/perf/jail_cost.py [N]
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from diagnose.runs.runner.child import Limits
from diagnose.runs.runner.container import Container, child_env
from diagnose.runs.runner.isolate import run_child
from diagnose.runs.runner.stages import StageRunner
from diagnose.runs.settings import Settings
from diagnose.tasks.loader import load_task


def main(n: int) -> None:
    runner = StageRunner(Settings(task=load_task(None, "fp8-dual-gemm", small=True), stages=("test",)))
    box = Container(Path(tempfile.mkdtemp(prefix="jail-cost-")))
    env, argv = child_env(box, None), [sys.executable, "-S", "-c", "print('ok')"]
    times: dict[str, list[float]] = {"jail": [], "none": []}
    for i in range(2 * n):
        kind = "jail" if i % 2 == 0 else "none"
        t0 = time.perf_counter()
        res = run_child(argv, cwd=str(box.work), env=env, stacks_path=str(box.tool / "s.txt"), limits=Limits(30, None),
                        jail=runner.jail_for(box) if kind == "jail" else None)
        times[kind].append(time.perf_counter() - t0)
        assert res.exit_code == 0 and "ok" in res.stdout_tail, (kind, res.exit_code, res.stderr_tail)
    runner.close()
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    print(f"{n} steps each, median wall per step: jail {med['jail']:.1f} ms, none {med['none']:.1f} ms; "
          f"the jail costs {med['jail'] - med['none']:.1f} ms a step ({med['jail'] / med['none']:.2f}x)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
