"""GPU tests (`python3 -m pytest -m gpu` on a CUDA machine): the seed scenarios and GPU faults."""
import json
import subprocess

import psutil
import pytest

from diagnose.session import StageResult
from tests.conftest import EXAMPLES, FIXTURES, cli, has_cuda

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU"), pytest.mark.e2e]


def gpu_mem_used_mb() -> int:
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout
    return int(out.split()[0])


def run_json(tmp_path, sub, *args):
    out = tmp_path / "o"
    res = cli("run", sub, "--out", out, *args)
    return res, json.loads((out / "session.json").read_text())


def test_round9_reproduces_the_crash_in_the_first_call(tmp_path):
    res, s = run_json(tmp_path, EXAMPLES / "round9.py", "--probes", "none", "--stages", "compile,test")
    v = s["verdict"]
    assert res.returncode == 1 and v["status"] == "crash" and v["stage"] == "test"
    assert v["phase"].startswith("first_call:")
    assert "Cannot prepare for replay during capturing stage" in v["message"]
    assert v["site"]["code"] == "output = _fused_silu_mul(r1, r2)"
    comp = s["runs"][0]["stages"][0]["compile_step"]     # `python3 submission.py` before the test stage
    imp = next(p for p in comp["phases"] if p["name"] == "script")
    assert 3.0 < imp["end_s"] - imp["start_s"] < 30.0     # compiling at import: seconds, not milliseconds
    assert comp["compile"], "the import-time compile left no metrics"


def test_round9_diagnosis_names_the_interaction_and_clears_the_rest(tmp_path):
    res, s = run_json(tmp_path, EXAMPLES / "round9.py", "--stages", "test,benchmark", "--jobs", "4",
                      "--probes", "graph_capture,compile_mode,fullgraph,warmup,import_init")
    top = s["causes"][0]
    assert set(top["suspects"]) == {"graph_capture", "compile_mode"} and top["changes_outcome"]
    assert {c["probe"] for c in s["cleared"]} == {"fullgraph", "warmup"}
    # deferring the import work only moved it into the first call, where it ran again: that clears nothing
    assert "only moved" in next(i["reason"] for i in s["inconclusive"] if i["probe"] == "import_init")
    assert s["fix"] and s["fix"]["steady_us"] > 0
    assert s["fix"]["probe"] == "compile_mode"
    assert not [r for r in s["runs"] if r["role"] == "confirm"]    # a crash does not depend on time


def test_recompile_storm_names_the_recompile_cause_and_charges_no_lock_waits(tmp_path):
    """Every call recompiles; the benchmark stage runs out of its 60 s budget. The diagnosis must name the
    recompiles (dynamic=True fixes it) above 'compile off', and no run may be charged for GPU lock waits."""
    res, s = run_json(tmp_path, FIXTURES / "gpu" / "recompile_storm.py", "--stages", "test,benchmark",
                      "--budget", "60")
    v = s["verdict"]
    assert res.returncode == 1 and v["status"] == "timeout" and v["stage"] == "benchmark", v
    top = s["causes"][0]
    assert top["suspects"] == ["recompile"] and "dynamic=True fixes it" in top["narrative"], top
    assert s["fix"] and s["fix"]["toggle"] in ("dynamic=True", "compile off")
    for r in s["runs"]:
        for st in r["stages"]:
            # held up: queued or paused, overlaps once; an overrun of its own timing section is no wait
            waits = StageResult.from_dict(st).lock_wait_s
            assert waits <= st["wall_s"] and abs(st["charged_s"] - (st["wall_s"] - waits)) < 0.01, st["lock_waits"]
            if st["status"] == "timeout":      # killed at the budget of charged time, never earlier
                assert st["charged_s"] >= 60.0 - 0.5, (r["id"], st["charged_s"], waits)


GPU_CORPUS = ["capture_closure_method.py", "reduce_overhead_capture.py", "named_warmup_capture.py"]


@pytest.mark.parametrize("name", GPU_CORPUS)
def test_gpu_corpus_top_cause(tmp_path, name):
    """Captures around compiled code reached through closures, methods and helpers, a reduce-overhead mode
    inside an outer capture, a named per-shape warmup before a capture: the right top cause."""
    from tests.test_corpus import judge, spec
    expect, args = spec(FIXTURES / "gpu" / name)
    res, s = run_json(tmp_path, FIXTURES / "gpu" / name, *args)
    assert judge(expect, s) is None, (judge(expect, s), s["verdict"], [c["narrative"] for c in s["causes"]])


def _tree(d):
    import hashlib
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*")) if p.is_file()}


def test_a_cuda_extension_is_built_in_each_runs_container_by_its_compile_step(tmp_path):
    """nvcc through load_inline at import, diagnosed twice: both runs build it cold in their compile step, the
    stage finds it built, and this machine's ~/.cache/torch_extensions is the same afterwards."""
    from pathlib import Path
    mine = Path.home() / ".cache" / "torch_extensions"
    before = _tree(mine) if mine.exists() else {}
    builds = []
    for i in range(2):
        res, s = run_json(tmp_path / str(i), FIXTURES / "gpu" / "inline_cuda.py", "--stages", "compile,test",
                          "--probes", "none")
        assert res.returncode == 0, res.stdout + res.stderr
        test = s["runs"][0]["stages"][0]
        step = test["compile_step"]
        builds.append(sum(p["end_s"] - p["start_s"] for p in step["phases"] if p["name"] == "script"))
        imported = sum(p["end_s"] - p["start_s"] for p in test["phases"] if p["name"] == "submission_import")
        assert imported < builds[-1] / 3
    assert min(builds) > 5.0 and max(builds) / min(builds) < 1.5, builds
    assert (_tree(mine) if mine.exists() else {}) == before


def test_baseline_is_healthy(tmp_path):
    res, s = run_json(tmp_path, EXAMPLES / "baseline.py", "--stages", "test,benchmark")
    assert res.returncode == 0 and s["verdict"]["status"] == "ok" and s["causes"] == []


@pytest.mark.parametrize("name,status,marker", [("illegal_access.py", "crash", "OOB-LINE"),
                                                ("gpu_hang.py", "timeout", "HANG-LINE"),
                                                ("pool_worker_exit.py", "timeout", "EXIT-LINE")])
def test_gpu_faults_are_reported_and_leave_nothing_behind(tmp_path, name, status, marker):
    before = gpu_mem_used_mb()
    res, s = run_json(tmp_path, FIXTURES / "gpu" / name, "--probes", "none", "--stages", "test",
                      "--budget", "25")
    v = s["verdict"]
    assert v["status"] == status, v
    st = s["runs"][0]["stages"][0]
    if status == "crash":
        assert "illegal memory access" in (v["message"] + st["stderr_tail"]).lower()
    elif st["lost_worker"]:     # sys.exit in the pool worker: the harness waits out the budget, we do not
        assert v["site"] and marker in v["site"]["code"] and v["phase"] == "first_call:256x512x256", v
        assert st["wall_s"] < 25 and "SystemExit: 1 ended the evaluator's pool worker" in v["message"], v
    else:
        assert v["site"] and marker in v["site"]["code"], (v, st["stacks"][-3000:], st["stderr_tail"][-2000:])
        # Python's own stacks, with the main thread in synchronize: not the kernel's wait channels
        assert "custom_kernel" in st["stacks"] and "synchronize" in st["stacks"], st["stacks"][-3000:]
        assert st["survivors"] == []
    assert not [p for p in psutil.process_iter(["cmdline"])
                if "diagnose.runs.worker" in " ".join(p.info["cmdline"] or [])]
    after = gpu_mem_used_mb()
    assert after <= before + 64, (before, after)
