"""Conclusions stay within their evidence, with real subprocesses on the CPU: a loaded host, a machine that
cannot judge the submission, source an AST walk cannot recurse through. (Toggles that never ran and a compile
that never happened: test_cli_scripted.py, exactly; the worker's record of reached lines: test_runner.py.)"""
import json
import subprocess
import sys
import time

import pytest

from tests.conftest import EXAMPLES, FIXTURES, cli

pytestmark = pytest.mark.e2e     # every test here starts real processes

P = FIXTURES / "corpus"


def session(out):
    return json.loads((out / "session.json").read_text())


def test_cuda_only_submissions_cannot_be_judged_on_a_cpu(tmp_path):
    """No CUDA here: the submission's CUDA calls fail for that reason alone. Exit 3. (That `run` then starts
    no variant and names no cause: test_engine.py, exactly; its exit 3: test_problems.py.)"""
    for name, phase in (("baseline.py", "first_call:"), ("round9.py", "submission_import")):
        res = cli("check", EXAMPLES / name, "--out", tmp_path / name)
        assert res.returncode == 3, res.stdout + res.stderr
        assert "CANNOT JUDGE HERE" in res.stdout and "SAFE" not in res.stdout.replace("CANNOT", "")
        s = session(tmp_path / name)
        assert s["verdict"]["status"] == "needs_gpu" and s["verdict"]["phase"].startswith(phase)
        assert "CUDA" in s["verdict"]["message"] or "cuda" in s["verdict"]["message"]


def test_a_busy_host_does_not_change_the_top_cause(tmp_path):
    """Two CPU hogs beside the diagnosis (this is a 2-core machine): the same top cause, and the report
    says the host was busy. The planted warmup sleeps 20 s a shape against a 36 s budget, so the baseline
    times out however idle the host, and the fixed run has 36 s for a few seconds of CPU work however busy:
    at 10 s a shape and 20 s, a CI host also running another test file timed the fixed run out as well."""
    sub = tmp_path / "wu_literal_compiled.py"
    sub.write_text((P / "wu_literal_compiled.py").read_text().replace("time.sleep(0.25)", "time.sleep(0.5)"))
    hog = "import time\nt = time.time() + 600\nwhile time.time() < t: pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(2)]
    try:
        time.sleep(1)
        out = tmp_path / "o"
        res = cli("run", sub, "--stages", "test", "--budget", "36", "--probes", "warmup",
                  "--jobs", "2", "--out", out)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    s = session(out)
    assert res.returncode == 1 and s["verdict"]["status"] == "timeout"
    assert s["causes"][0]["suspects"] == ["warmup"] and s["causes"][0]["changes_outcome"]
    assert any(w["kind"] == "host_busy" for w in s["warnings"]), s["warnings"]
    assert "host was busy" in (out / "report.md").read_text()


def test_valid_python_that_an_ast_walk_cannot_recurse_through_is_accepted(tmp_path):
    """A constant written as a sum of 2,000 terms on one line: python3 runs it; an AST object of it is too deep
    for compile()'s validator. The submission is judged, not refused as bad input."""
    sub = tmp_path / "long_sum.py"
    sub.write_text("import torch\nimport torch.nn.functional as F\n\nSCALE = " + " + ".join(["1"] * 2000) +
                   "\n\n\ndef custom_kernel(data):\n    a, b1, b2, sa, sb1, sb2 = data\n"
                   "    r1 = torch._scaled_mm(a, b1.t(), sa, sb1, out_dtype=torch.float32)\n"
                   "    r2 = torch._scaled_mm(a, b2.t(), sa, sb2, out_dtype=torch.float32)\n"
                   "    return (F.silu(r1) * r2).half() * (SCALE // 2000)\n")
    out = tmp_path / "o"
    res = cli("run", sub, "--stages", "test", "--probes", "none", "--out", out)
    assert res.returncode == 0, res.stdout + res.stderr
    assert session(out)["verdict"]["status"] == "ok"
