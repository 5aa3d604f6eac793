"""The CLI as a user runs it: real subprocesses, exit codes, files written, errors in one line."""
import fcntl
import json
import os
import resource
import statistics
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, ROOT, cli

pytestmark = pytest.mark.e2e     # every test here starts real processes

HEALTHY = FIXTURES / "healthy.py"


def one_error_line(res):
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr and lines[0].startswith("error:")
    return lines[0]


@pytest.mark.parametrize("content,expect", [
    (b"def custom_kernel(:\n", "syntax error"),
    (b"import torch\ndef kernel(data):\n    return data\n", "defines no custom_kernel"),
    (b"custom_kernel = 42\n", "not a callable"),
])
def test_bad_source_is_one_line_and_exit_2_before_any_process(tmp_path, content, expect):
    f = tmp_path / "sub.py"
    f.write_bytes(content)
    for cmd in ("run", "check"):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        res = cli(cmd, f, "--out", tmp_path / "o")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert res.returncode == 2, res.stderr
        assert expect in one_error_line(res)
        assert not (tmp_path / "o").exists()
        # nothing was started: the CPU time says so (a wall-clock limit fails on a busy machine)
        assert (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime) < 3


def test_missing_file_and_directory(tmp_path):
    assert "no such file" in one_error_line(cli("run", tmp_path / "nope.py"))
    assert "is a directory" in one_error_line(cli("run", tmp_path))


def test_bad_options(tmp_path):
    assert "--stages" in one_error_line(cli("run", HEALTHY, "--stages", "test,bogus"))
    assert "--budget" in one_error_line(cli("run", HEALTHY, "--budget", "-3"))
    assert "unknown probe" in one_error_line(cli("run", HEALTHY, "--probes", "nope"))
    assert "unknown task" in one_error_line(cli("run", HEALTHY, "--task", "nope"))


@pytest.mark.parametrize("args,names", [
    (["--budget", "abc"], "'--budget'"),          # typer's own type error, as one line
    (["--budget", "nan"], "--budget"),
    (["--budget", "inf"], "--budget"),
    (["-j", "0"], "--jobs"),
    (["--repeat", "0"], "--repeat"),
    (["--gpus", "0"], "--gpus"),                  # no GPU on this machine
    (["--nope"], "--nope"),
])
def test_every_bad_value_is_one_error_line_naming_the_option(tmp_path, args, names):
    res = cli("run", HEALTHY, *args, "--out", tmp_path / "o")
    assert res.returncode == 2
    assert names in one_error_line(res)
    assert not (tmp_path / "o").exists()


def test_out_must_be_a_writable_directory_that_no_other_run_holds(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    assert "not a directory" in one_error_line(cli("run", HEALTHY, "-o", f))
    assert f.read_text() == "x"
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    if not os.access(ro, os.W_OK):      # root can write anywhere: nothing to test then
        assert "--out" in one_error_line(cli("run", HEALTHY, "-o", ro / "sub"))
    held = tmp_path / "held"
    held.mkdir()
    fd = os.open(held, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)      # as a running diagnose holds its --out
    try:
        assert "another diagnose run" in one_error_line(cli("run", HEALTHY, "-o", held))
    finally:
        os.close(fd)


def test_version_short_help_and_usage_line():
    res = cli("--version")
    assert res.returncode == 0 and res.stdout.startswith("diagnose ")
    res = cli("run", "-h")
    assert res.returncode == 0
    assert res.stdout.splitlines()[0] == "Usage: diagnose run [OPTIONS] SUBMISSION"
    for opt in ("-o, --out", "-j, --jobs", "-q, --quiet", "-v, --verbose", "-b, --budget", "--task",
                "--small / --full-shapes"):
        assert opt in res.stdout, opt
    assert "<bool>" not in res.stdout


def test_bad_problem_directories(tmp_path):
    d = tmp_path / "prob"
    d.mkdir()
    assert "no task.yml" in one_error_line(cli("run", HEALTHY, "--problem", d))
    (d / "task.yml").write_text("tests: [{m: 1}]\nbenchmarks: [{m: 1}]\n")
    assert "no reference.py" in one_error_line(cli("run", HEALTHY, "--problem", d))
    (d / "reference.py").write_text("def generate_input(**k): pass\ndef check_implementation(d, o): pass\n")
    (d / "task.yml").write_text("tests: [\n  {m: 1\n")
    assert "malformed YAML" in one_error_line(cli("run", HEALTHY, "--problem", d))
    (d / "task.yml").write_text("tests: []\nbenchmarks: [{m: 1}]\n")
    assert "'tests' must be a non-empty list" in one_error_line(cli("run", HEALTHY, "--problem", d))
    (d / "task.yml").write_text("tests: [{m: 1}]\nbenchmarks: [{m: 1}]\n")
    (d / "reference.py").write_text("def generate_input(**k): pass\n")
    assert "check_implementation" in one_error_line(cli("run", HEALTHY, "--problem", d))


def test_help_is_instant_because_the_parent_never_imports_torch():
    import resource
    times = []
    for _ in range(3):
        # the CPU time the process spent, which a busy machine does not inflate as it does wall time (importing
        # torch alone costs seconds of it)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        res = subprocess.run([sys.executable, "-m", "diagnose", "--help"], capture_output=True, text=True,
                             cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        assert res.returncode == 0 and "run" in res.stdout
    assert statistics.median(times) < 0.5, times
    code = ("import sys, diagnose.cli.app, diagnose.engine, diagnose.runs.runner.stages, "
            "diagnose.analysis.causes.bisector, diagnose.output; print('torch' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.stdout.strip() == "False", res.stderr


def test_run_healthy_writes_the_contract_and_exits_0(tmp_path):
    out = tmp_path / "o"
    res = cli("run", HEALTHY, "--out", out, "--sample-repeats", "2", "--stages", "compile,test,benchmark")
    assert res.returncode == 0, res.stderr + res.stdout
    assert sorted(p.name for p in out.iterdir()) == ["report.md", "session.json", "trace.json"]
    s = json.loads((out / "session.json").read_text())
    assert s["schema_version"] == 5 and s["complete"] is True
    assert s["verdict"]["status"] == "ok" and s["causes"] == [] and s["fix"] is None
    # the compile step runs before each stage, inside its record; the stages alone are the run's stages
    stages = s["runs"][0]["stages"]
    assert [st["name"] for st in stages] == ["test", "benchmark"]
    assert [st["compile_step"]["name"] for st in stages] == ["compile", "compile"]
    assert "script" in [p["name"] for p in stages[0]["compile_step"]["phases"]]
    phases = [p["name"] for p in stages[0]["phases"]]
    assert "submission_import" in phases and any(p.startswith("first_call:") for p in phases)
    md = (out / "report.md").read_text()
    assert "- **Verdict:** OK" in md and "small shape set" in md and "say nothing about a GPU budget" in md
    # re-render offline, every format
    for fmt in ("md", "json", "trace"):
        r = cli("report", out / "session.json", "--format", fmt)
        assert r.returncode == 0 and r.stdout
    assert cli("report", out / "session.json").stdout == md


def test_report_rejects_what_is_not_a_session(tmp_path):
    f = tmp_path / "s.json"
    f.write_text("{\"a\": 1}")
    assert "not a diagnose session" in one_error_line(cli("report", f))
    f.write_text("not json")
    assert "not a diagnose session (not a JSON file)" in one_error_line(cli("report", f))
    assert "not a diagnose session" in one_error_line(cli("report", HEALTHY))
    assert "no such file" in one_error_line(cli("report", tmp_path / "none.json"))


@pytest.mark.parametrize("name,status", [("raises.py", "crash"), ("wrong.py", "wrong")])
def test_problems_exit_1_with_the_verdict(tmp_path, name, status):
    res = cli("run", FIXTURES / name, "--out", tmp_path / "o", "--stages", "test", "--probes", "none")
    assert res.returncode == 1
    s = json.loads((tmp_path / "o" / "session.json").read_text())
    assert s["verdict"]["status"] == status and s["verdict"]["stage"] == "test"


def test_default_output_folder_is_reports_stem_timestamp(tmp_path):
    res = cli("run", HEALTHY, "--stages", "test", "--probes", "none", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (d,) = list((tmp_path / "reports").iterdir())
    assert d.name.startswith("healthy-") and (d / "report.md").exists()


def test_problem_directory_uses_its_own_inputs_and_checks(tmp_path):
    d = tmp_path / "prob"
    d.mkdir()
    (d / "reference.py").write_text(
        "import torch\n"
        "def generate_input(size, seed):\n    g = torch.Generator().manual_seed(seed)\n"
        "    return torch.rand(size, generator=g)\n"
        "def check_implementation(data, output):\n"
        "    ok = torch.allclose(output, data * 2)\n    return ok, 'ok' if ok else 'not doubled'\n")
    (d / "task.yml").write_text("tests:\n  - {size: 8, seed: 1}\n  - {size: 16, seed: 2}\n"
                                "benchmarks:\n  - {size: 32, seed: 3}\n")
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("def custom_kernel(x):\n    return x * 2\n")
    bad.write_text("def custom_kernel(x):\n    return x * 3\n")
    res = cli("run", good, "--problem", d, "--out", tmp_path / "g", "--probes", "none", "--sample-repeats", "2")
    assert res.returncode == 0, res.stdout + res.stderr
    s = json.loads((tmp_path / "g" / "session.json").read_text())
    assert s["runs"][0]["role"] == "reference" and s["runs"][0]["outcome"] == "ok"   # checked alone first
    base = next(r for r in s["runs"] if r["role"] == "baseline")
    test_phases = [p["name"] for p in base["stages"][0]["phases"]]
    assert "first_call:size=8" in test_phases and "first_call:size=16" in test_phases
    res = cli("run", bad, "--problem", d, "--out", tmp_path / "b", "--probes", "none", "--stages", "test")
    assert res.returncode == 1
    s = json.loads((tmp_path / "b" / "session.json").read_text())
    assert s["verdict"]["status"] == "wrong" and "not doubled" in s["verdict"]["message"]


def test_probes_lists_the_registry():
    res = cli("probes")
    assert res.returncode == 0
    for name in ("graph_capture", "compile_mode", "fullgraph", "warmup", "import_init", "cache", "recompile"):
        assert name in res.stdout
