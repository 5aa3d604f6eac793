"""GPU MODE problem folders, judged by their own evaluators (CPU, small folders written for these tests
in each real convention: a checker bound by assignment, `files` with ../utils.py and a renamed
evaluator, a string checker, per-problem timeouts, one-input-per-call and 50-input evaluators, a
multi-GPU folder, broken folders)."""
import json

import pytest

from tests.conftest import FIXTURES, cli

pytestmark = pytest.mark.e2e     # every test here starts real processes

P = FIXTURES / "problems"
S = P / "subs"


def run(tmp_path, sub, problem, *args):
    out = tmp_path / "o"
    res = cli("run", S / sub, "--problem", P / problem, "--probes", "none", "--out", out, *args)
    s = json.loads((out / "session.json").read_text()) if (out / "session.json").exists() else None
    return res, s


def base_stage(s, name):
    base = next(r for r in s["runs"] if r["role"] == "baseline")
    return next(st for st in base["stages"] if st["name"] == name)


def passed_stage(s, name):
    """The stage of the run the pass rests on: the baseline's, or its solo rerun's where the baseline ran out
    of time only beside other tests' processes (a loaded CI machine)."""
    run = next(r for r in s["runs"] if r["id"] == s["verdict"]["runs"][-1])
    return next(st for st in run["stages"] if st["name"] == name)


def test_the_folders_own_evaluator_judges_and_its_pool_worker_is_instrumented(tmp_path):
    res, s = run(tmp_path, "double_ok.py", "doubling", "--stages", "test,benchmark")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "eval.py (from ../common/eval_one_input.py)" in s["harness"]["evaluator"]
    test = passed_stage(s, "test")
    assert test["evaluator"]["report"]["check"] == "pass" and test["evaluator"]["report"]["test.1.status"] == "pass"
    phases = [p["name"] for p in test["phases"]]
    # the submission runs in the evaluator's spawned pool worker: its phases come from there
    assert "first_call:size=16" in phases and "first_call:size=64" in phases
    assert {e["pid"] for e in test["events"] if e["k"] == "begin" and e["name"].startswith("first_call:")} != \
        {next(e["pid"] for e in test["events"] if e["k"] == "worker_start")}
    bench = passed_stage(s, "benchmark")
    assert int(bench["evaluator"]["report"]["benchmark.0.runs"]) >= 3
    ref = next(r for r in s["runs"] if r["role"] == "reference")
    assert ref["outcome"] == "ok"                 # the reference was checked alone first
    assert "evaluator" in (tmp_path / "o" / "report.md").read_text()


@pytest.mark.parametrize("sub,status,fragment", [("double_wrong.py", "wrong", "elements differ"),
                                                 ("double_raises.py", "crash", "too big for my tile")])
def test_wrong_and_crashing_submissions(tmp_path, sub, status, fragment):
    res, s = run(tmp_path, sub, "doubling", "--stages", "test")
    v = s["verdict"]
    assert res.returncode == 1 and v["status"] == status and fragment in v["message"]
    if status == "crash":    # the line comes from the pool worker's traceback
        assert v["site"]["line"] == 3 and v["phase"] == "first_call:size=64"
    else:
        assert v["phase"] == "check:size=16"
    # run with --probes none: the failure and where, and that its cause was not looked for (issue 47)
    (said,) = s["inconclusive"]
    assert not s["causes"] and said["probe"] == "not looked for" and "`diagnose run " in said["reason"], said
    assert f"line {said['site']['line']}" in said["reason"] and "--probes" not in said["reason"]


def test_per_problem_timeouts_come_from_task_yml(tmp_path):
    res, s = run(tmp_path, "double_slow.py", "doubling", "--stages", "test")
    v = s["verdict"]
    assert res.returncode == 1 and v["status"] == "timeout" and "30 s budget" in v["message"]
    assert s["harness"]["budgets"]["test"] == 30.0 and v["site"]["line"] == 5
    # recorded as the user would write it: a report attached to a ticket carries no machine's layout
    assert s["task"]["directory"] == "tests/fixtures/problems/doubling"


def test_string_checker_and_fifty_input_evaluator(tmp_path):
    res, s = run(tmp_path, "cumsum_ok.py", "strings", "--stages", "test,benchmark")
    assert res.returncode == 0 and s["verdict"]["status"] == "ok"
    assert base_stage(s, "benchmark")["evaluator"]["report"]["benchmark.0.status"] == "pass"
    res, s = run(tmp_path / "w", "cumsum_wrong.py", "strings", "--stages", "test")
    assert res.returncode == 1 and s["verdict"]["status"] == "wrong" and "prefix sums differ" in s["verdict"]["message"]


def test_a_multi_gpu_problem_needs_its_gpus(tmp_path):
    for cmd in ("run", "check"):
        res = cli(cmd, S / "double_ok.py", "--problem", P / "multi", "--out", tmp_path / cmd)
        assert res.returncode == 3, res.stdout + res.stderr
        s = json.loads((tmp_path / cmd / "session.json").read_text())
        assert s["verdict"]["status"] == "needs_gpu" and "needs 8 GPUs" in s["verdict"]["message"]
        assert s["runs"] == []


def test_a_reference_that_needs_cuda_cannot_be_judged_on_a_cpu(tmp_path):
    res, s = run(tmp_path, "double_ok.py", "cuda_only", "--stages", "test")
    assert res.returncode == 3 and s["verdict"]["status"] == "needs_gpu" and s["verdict"]["stage"] == "reference"
    assert "CUDA" in s["verdict"]["message"] and s["causes"] == []
    assert [r["role"] for r in s["runs"]] == ["reference"]       # no stage of the submission ran


def test_a_package_this_machine_lacks_is_exit_3_naming_it(tmp_path):
    """Not bad input: the folder is fine, this machine cannot judge it."""
    res, s = run(tmp_path, "double_ok.py", "needs_package", "--stages", "test")
    assert res.returncode == 3, res.stdout + res.stderr
    assert "'package_not_installed_here', which is not installed here" in s["verdict"]["message"]
    assert [r["role"] for r in s["runs"]] == ["reference"]


@pytest.mark.parametrize("problem,fragment", [
    ("broken_files", "../common/eval_missing.py (as eval.py) does not exist"),
    ("broken_import", "fails to import: ModuleNotFoundError: No module named 'helpers_not_listed'"),
    ("princeton", "it defines generate_inputs"),
])
def test_broken_folders_are_bad_input(tmp_path, problem, fragment):
    out = tmp_path / "o"
    res = cli("run", S / "double_ok.py", "--problem", P / problem, "--out", out)
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert lines[0].startswith("error:") and fragment in lines[0], res.stderr
    assert "Traceback" not in res.stderr and not (out / "session.json").exists()


@pytest.mark.parametrize("problem", ["precise", "precise_eval"])
def test_a_wrong_result_says_how_wrong_and_the_reference_settings_alone_fix_it(tmp_path, problem):
    """The reference computes with float64 as its default dtype; the submission leaves torch's float32. The
    verdict carries the errors against the tolerance; the numerics probe sets the reference's settings in the
    submission, and that alone passes. In both the worker's own model and a folder's evaluator (whose pool
    worker does the check)."""
    res, s = run(tmp_path, "running_sum.py", problem, "--stages", "test", "--probes", "numerics")
    assert res.returncode == 1, res.stdout + res.stderr
    v = s["verdict"]
    assert v["status"] == "wrong" and "outside rtol=1e-06 atol=1e-06" in v["note"] and "worst at [" in v["note"], v
    (wrong,) = [r for r in base_stage(s, "test")["probe_facts"]["numerics"] if r["event"] == "wrong"]
    assert wrong["reference"]["default_dtype"] == "float64"
    assert wrong["submission"]["default_dtype"] == "float32"
    top = s["causes"][0]
    assert top["suspects"] == ["numerics"] and top["changes_outcome"], top
    assert "torch.set_default_dtype(torch.float64)" in s["fix"]["diff"]
