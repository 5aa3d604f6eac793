"""Hand-built sessions and stage records for unit, golden and fake-runner tests: no process, no torch."""
from diagnose.session import Contention, Phase, Role, Run, Session, StageResult
from diagnose.status import Status

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
ROLE = {None: Role.BASELINE}


def stage(name, status="ok", wall=10.0, per_call_us=None, predicted=None, lock_wait=0.0, delay=0.0,
          overlapped=(), reached=None, budget=None, **kw):
    """reached=None: the fake runner marks every watched line as executed; [] says none was."""
    status = Status(status)
    phases = [Phase("torch_import", 0.0, 2.0), Phase("submission_import", 2.0, 3.0)]
    if name != "compile":
        phases.append(Phase("first_call:256x512x256", 3.0, min(wall, 5.0), open=status == Status.TIMEOUT))
    timing = {}
    if per_call_us and name == "benchmark":
        timing = {c: {"per_call_s": [us * 1e-6] * 5, "repeat_wall_s": [0.03] * 5, "depth": "sample",
                      "stop_reason": "sample"} for c, us in per_call_us.items()}
    charged = round(wall - lock_wait, 4)
    waits = [{"start_s": 0.5, "seconds": lock_wait, "mode": "shared"}] if lock_wait else []
    st = StageResult(name=name, status=status, wall_s=wall, budget_s=budget or BUDGETS[name], charged_s=charged,
                     phases=phases, timing=timing, predicted_s=predicted, lock_waits=waits,
                     contention=Contention(overlapped=list(overlapped), run_delay_s=delay), reached=list(reached or []),
                     **kw)
    st.scripted_unreached = reached is not None and not reached
    return st


# What each probe's toggle takes away in SOURCE, as a run of the variant records it (analysis/effects/effects.py
# measures it against the baseline's record): the compile call's settings, the outer capture, the warmup loop's time
# at L8.
_COMPILE = {"caller_file": "/c/r0/work/submission.py", "caller_line": 2, "target": "f", "via": "decorator"}
# An outer capture still open in the first call, as the graph_capture probe's facts hold one (a record of a schema-4
# session's StageResult.captures, lifted: probes/graph_capture/facts.py reads it as its hook's begin and end events)
OUTER_CAPTURE = {"event": "capture", "origin": "outer", "phase": "first_call:256x512x256", "start_s": 3.5,
                 "end_s": None}
_AFTER = {"compile_mode": {"mode": "default"}, "fullgraph": {"mode": "max-autotune", "fullgraph": False},
          "recompile": {"mode": "max-autotune", "dynamic": True}}


def _records(st: StageResult, gone: set, first: bool) -> None:
    """The records a stage of SOURCE leaves, with the suspects in `gone` taken away (none: the baseline's)."""
    kw = {"mode": "max-autotune"}
    for p in sorted(gone & set(_AFTER)):
        kw.update(_AFTER[p])
    st.compile_calls = [{**_COMPILE, "kwargs": kw}]
    if first:       # a frame compiled at import, once per run, and an outer capture in its first call
        st.compile = st.compile or [{"compile_id": "0/0", "phase": "submission_import",
                                     "duration_us": 1e6 if "cache" in gone else 5e6}]
    if first and not st.probe_facts.get("graph_capture") and "graph_capture" not in gone:
        st.probe_facts["graph_capture"] = [OUTER_CAPTURE]
    st.samples = {"first_call:256x512x256": {"stack": {"8": 20 if "warmup" in gone else 300, "4": 400}}}
    st.sample_interval_s = 0.01


def run(rid, probe=None, toggle=None, outcome="ok", walls=(5, 10, 20), per_call_us=None, variant=None, sha=None,
        fail_at=None, site=None, role=None, watched=(), reached=None, delay=0.0, overlapped=(), budgets=None,
        exception=None, seen=True, acted=True, removed=(), **switches):
    """seen: its stages show the mechanisms SOURCE has (a compile, a capture), as a run of it would. acted: a
    variant's records show its toggle took its suspect's work away (acted=False: the edit left it as it was);
    removed: a combination's suspects taken away."""
    stages = []
    reached = list(watched) if reached is None else list(reached)
    budgets = budgets or BUDGETS
    for name, wall in zip(BUDGETS, walls, strict=False):
        common = dict(wall=wall, reached=reached, delay=delay, overlapped=overlapped, budget=budgets[name])
        if fail_at == name:
            stages.append(stage(name, status=outcome, message=f"{outcome} here", phase="first_call:256x512x256",
                                site=site, exception=exception, **common))
            stages += [StageResult(name=n, status=Status.SKIPPED, budget_s=budgets[n])
                       for n in list(BUDGETS)[len(stages):]]
            break
        stages.append(stage(name, per_call_us=per_call_us, **common))
    role = role or (Role.BASELINE if probe is None else Role.SINGLE)
    gone = set() if probe is None or not acted else set(removed) if role == Role.COMBINATION else {probe}
    for i, st in enumerate(stages if seen else []):
        if st.status != Status.SKIPPED:
            _records(st, gone, first=i == 0)
    if seen and stages and probe is None:
        # what SOURCE does when it runs: a frame compiled at import, an outer capture in the first call
        first = stages[0]
        first.compile = first.compile or [{"compile_id": "0/0", "phase": "submission_import", "duration_us": 0}]
        first.probe_facts["graph_capture"] = first.probe_facts.get("graph_capture") or [OUTER_CAPTURE]
    return Run(id=rid, probe=probe, toggle=toggle, outcome=Status(outcome), stages=stages, role=role,
               variant=variant if variant is not None else (None if probe is None else f"--- a\n+++ b\n-{rid}\n"),
               source_sha=sha or rid, switches=switches, watched=list(watched), removed=list(removed))


def session(runs, scan=SCAN) -> Session:
    return Session(submission={"path": "kernels/sub.py", "name": "sub.py", "sha256": "x", "source": SOURCE},
                   task={"name": "fp8-dual-gemm", "shape_set": "full"},
                   harness={"name": "gpumode", "depth": "predict", "stages": list(BUDGETS), "budgets": BUDGETS,
                            "compile_step": True, "ranking_by": "geom",
                            "container": {"dropped_env": ["TORCHINDUCTOR_CACHE_DIR"],
                                          "walls": {"namespace": "mount", "private": ["/tmp", "/dev/shm"],
                                                    "kept": 1, "why": None}}},
                   command=["diagnose", "run", "sub.py"], created="2026-11-21T00:00:00+00:00", tool_version="0.1.0",
                   scan=scan, runs=runs, complete=True)
