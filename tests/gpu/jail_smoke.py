"""On a GPU machine, before a triage: does a run's jail (runs/jail.py) hold there, what does it cost a step, and
does CUDA work inside it (the jail's /dev has only what a GPU program opens)?"""
import json
import subprocess
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

runner = StageRunner(Settings(task=load_task(None, "fp8-dual-gemm", small=True), stages=("test",)))
walls = runner.isolation()
print("isolation:", json.dumps({k: walls.get(k) for k in ("jail", "missing", "why", "private", "unlent", "read_only")}))
box = Container(Path(tempfile.mkdtemp(prefix="jail-smoke-")))
code = ("import torch, os; a = torch.randn(512, 512, device='cuda'); torch.cuda.synchronize(); "
        "print('cuda ok', torch.cuda.get_device_name(), float((a @ a).sum().item()) == float((a @ a).sum().item()), "
        "sorted(os.listdir('/dev')))")
for jailed in (True, False):
    t0 = time.perf_counter()
    res = run_child([sys.executable, "-c", code], cwd=str(box.work), env=child_env(box, "0"),
                    stacks_path=str(box.tool / "s.txt"), limits=Limits(120, None),
                    jail=runner.jail_for(box) if jailed else None)
    print("jailed" if jailed else "unjailed", f"{time.perf_counter() - t0:.2f} s", "exit", res.exit_code,
          res.stdout_tail.strip()[-400:], res.stderr_tail.strip()[-800:])
runner.close()
print(subprocess.run([sys.executable, "tests/perf/jail_cost.py", "20"], capture_output=True, text=True).stdout)
