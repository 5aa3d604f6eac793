"""Hand-built sessions for unit and golden tests: no process, no torch."""
from diagnose.session import Phase, Run, Session, StageResult

SOURCE = "\n".join([
    "import torch",                                          # 1
    "@torch.compile(mode='max-autotune')",                   # 2
    "def f(x): return x",                                    # 3
    "def custom_kernel(data):",                              # 4
    "    g = torch.cuda.CUDAGraph()",                        # 5
    "    with torch.cuda.graph(g):",                         # 6
    "        y = f(data)",                                   # 7
    "    for _ in range(10): f(data)",                       # 8
    "    return y",                                          # 9
])
SCAN = [
    {"suspect": "compile", "line": 2, "end_line": 2, "code": "@torch.compile(mode='max-autotune')", "details": {}},
    {"suspect": "capture", "line": 6, "end_line": 7, "code": "with torch.cuda.graph(g):", "details": {}},
    {"suspect": "warmup", "line": 8, "end_line": 8, "code": "for _ in range(10): f(data)", "details": {}},
]
BUDGETS = {"compile": 120.0, "test": 180.0, "benchmark": 180.0}


def stage(name, status="ok", wall=10.0, per_call_us=None, predicted=None, **kw):
    phases = [Phase("torch_import", 0.0, 2.0), Phase("submission_import", 2.0, 3.0)]
    if name != "compile":
        phases.append(Phase("first_call:256x512x256", 3.0, min(wall, 5.0), open=status == "timeout"))
    timing = {}
    if per_call_us and name == "benchmark":
        timing = {c: {"per_call_s": [us * 1e-6] * 5, "repeat_wall_s": [0.03] * 5, "depth": "sample",
                      "stop_reason": "sample"} for c, us in per_call_us.items()}
    return StageResult(name=name, status=status, wall_s=wall, budget_s=BUDGETS[name], phases=phases,
                       timing=timing, predicted_s=predicted if predicted is not None else wall, **kw)


def run(rid, probe=None, toggle=None, outcome="ok", walls=(5, 10, 20), per_call_us=None, variant=None, sha=None,
        fail_at=None, site=None, **switches):
    stages = []
    for name, wall in zip(BUDGETS, walls):
        if fail_at == name:
            stages.append(stage(name, status=outcome, wall=wall, message=f"{outcome} here",
                                phase="first_call:256x512x256", site=site))
            stages += [StageResult(name=n, status="skipped", budget_s=BUDGETS[n]) for n in list(BUDGETS)[len(stages):]]
            break
        stages.append(stage(name, wall=wall, per_call_us=per_call_us))
    return Run(id=rid, probe=probe, toggle=toggle, outcome=outcome, stages=stages,
               variant=variant if variant is not None else (None if probe is None else f"--- a\n+++ b\n-{rid}\n"),
               source_sha=sha or rid, switches=switches)


def session(runs, scan=SCAN) -> Session:
    return Session(submission={"path": "kernels/sub.py", "name": "sub.py", "sha256": "x", "source": SOURCE},
                   task={"name": "fp8-dual-gemm", "shape_set": "full"},
                   harness={"name": "gpumode", "depth": "predict", "stages": list(BUDGETS), "budgets": BUDGETS},
                   command=["diagnose", "run", "sub.py"], created="2026-11-21T00:00:00+00:00", tool_version="0.1.0",
                   scan=scan, runs=runs, complete=True)
