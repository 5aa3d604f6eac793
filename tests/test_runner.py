"""Real subprocess runs of planted fixtures through the isolated runner (no probes)."""
import json
import threading

import pytest

from diagnose.analysis.verdict import summary
from diagnose.runs.harness import stage_budgets
from diagnose.runs.runner import DeviceUp, Job
from diagnose.runs.runner.stages import StageRunner
from diagnose.runs.settings import Settings
from diagnose.session import Run
from diagnose.status import Status
from diagnose.tasks.loader import load_task
from tests.conftest import FIXTURES

pytestmark = pytest.mark.e2e     # every test here starts real processes


def run_fixture(name, stages=("test",), budget=60, source=None, watch=(), **kw) -> Run:
    task = load_task(None, "fp8-dual-gemm", small=True)
    settings = Settings(task=task, stages=tuple(stages), budgets=stage_budgets(budget, {}), sample_repeats=2,
                        sample_seconds=0.5, **kw)
    runner = StageRunner(settings)
    run = Run(id="r0", probe=None)
    try:
        runner.execute(Job(run, source or (FIXTURES / name).read_text(), list(stages), watch=list(watch)),
                       lambda r: None, threading.Event())
    finally:
        runner.close()
    return run


def line_of(name, marker):
    return next(i for i, ln in enumerate((FIXTURES / name).read_text().splitlines(), 1) if marker in ln)


def test_sleep_at_import_shows_in_the_import_phase():
    run = run_fixture("sleep_import.py")
    st = run.stage("test")
    assert run.outcome == Status.OK
    imp = st.phase_s("submission_import")
    assert 2.9 <= imp <= 4.5, imp
    # the other phases are not charged with it
    assert st.phase_s("first_call:") < 1.0


def test_infinite_loop_times_out_with_the_looping_line_in_the_stack():
    spin, after = line_of("loop_forever.py", "SPIN-CALL"), line_of("loop_forever.py", "NEVER-REACHED")
    run = run_fixture("loop_forever.py", budget=6, watch=[spin, after])
    st = run.stage("test")
    # watched lines: the call that hung ran, the line after it never did (what a toggle's evidence rests on)
    assert st.reached == [spin], st.reached
    assert run.outcome == Status.TIMEOUT and st.status == Status.TIMEOUT
    assert st.phase.startswith("first_call:")
    assert st.site["line"] == line_of("loop_forever.py", "LOOP-LINE")
    assert "loop_forever" not in st.stacks      # the run's copy of the file is named submission.py
    assert 'submission.py", line' in st.stacks
    assert st.survivors == []
    assert 6 <= st.wall_s < 12


def test_exception_is_a_crash_at_its_line():
    run = run_fixture("raises.py")
    st = run.stage("test")
    assert run.outcome == Status.CRASH
    assert st.message.startswith("ValueError: unsupported shape")
    assert st.site["line"] == line_of("raises.py", "RAISE-LINE")
    assert st.phase.startswith("first_call:")


def test_wrong_values_are_wrong_with_the_failed_check():
    run = run_fixture("wrong.py")
    st = run.stage("test")
    assert run.outcome == Status.WRONG
    assert st.phase.startswith("check:")
    assert "differ beyond" in st.message


def test_healthy_passes_every_stage_with_timing_samples():
    run = run_fixture("healthy.py", stages=("compile", "test", "benchmark", "leaderboard"))
    assert run.outcome == Status.OK, [(s.name, s.status, s.message) for s in run.stages]
    assert [s.name for s in run.stages] == ["compile", "test", "benchmark", "leaderboard"]
    bench = run.stage("benchmark")
    assert set(bench.timing) == {"64x256x512", "128x128x256"}
    for t in bench.timing.values():
        assert len(t["per_call_s"]) >= 2 and all(x > 0 for x in t["per_call_s"])
        assert t["predicted"]["repeats"] >= 2
    assert bench.predicted_s is not None
    # phases are ordered and inside the stage's wall time
    for st in run.stages:
        assert all(0 <= p.start_s <= p.end_s <= st.wall_s + 0.01 for p in st.phases)
    flush = next(e for e in bench.events if e["k"] == "flush")
    assert flush["device"] == "cpu" and flush["bytes"] == 0


def test_failed_stage_skips_the_rest():
    run = run_fixture("raises.py", stages=("compile", "test", "benchmark"))
    assert [(s.name, str(s.status)) for s in run.stages] == [("compile", "ok"), ("test", "crash"),
                                                             ("benchmark", "skipped")]


@pytest.mark.slow
def test_real_torch_compile_time_is_split_by_phase():
    run = run_fixture("compiled.py", budget=170)
    st = run.stage("test")
    assert run.outcome == Status.OK, st.message
    assert st.compile, "no compile metrics recorded"
    first = st.phases[[p.name for p in st.phases].index("first_call:64x128x256")]
    assert st.compile[0]["phase"] == first.name
    split = summary.compile_split(st.compile)
    assert split["total"] > 1.0
    assert split["inductor"] > 0 and split["dynamo"] >= 0
    fc = summary.first_call(st)
    assert fc["compile_s"] > 0.5 * fc["total_s"]   # the first call is mostly compiling
    assert abs(fc["compile_s"] + fc["capture_s"] + fc["rest_s"] - fc["total_s"]) < 0.01
    json.dumps(st.compile)


def test_a_variant_runs_niced_and_so_do_the_processes_it_starts(tmp_path):
    """A toggle beside the baseline yields the CPU to it: its process and what that process starts run at the
    niceness the engine gave the job; a job with none runs at this process's own."""
    import os
    import sys

    from diagnose.runs.runner.child import Limits
    from diagnose.runs.runner.isolate import run_child
    # (a moment's sleep first: the niceness is set as the process starts, not before its first instruction)
    code = ("import os, subprocess, sys, time; time.sleep(0.5); print(os.nice(0)); "
            "print(subprocess.run([sys.executable, '-c', 'import os; print(os.nice(0))'], capture_output=True, "
            "text=True).stdout.strip())")
    own = os.nice(0)
    for nice, want in ((5, own + 5), (0, own)):
        res = run_child([sys.executable, "-c", code], cwd=str(tmp_path), env=dict(os.environ),
                        stacks_path=str(tmp_path / f"s{nice}.txt"), limits=Limits(60.0, None), nice=nice)
        assert res.exit_code == 0, res.stderr_tail
        assert res.stdout_tail.split() == [str(min(want, 19))] * 2, (nice, res.stdout_tail)


def test_the_baselines_job_says_when_it_has_its_device_and_a_held_job_starts_no_process(tmp_path):
    """A job's `device_up` is set as its process ends its device_init phase, long before its stage ends (here: a
    40 s sleep at import); a job held by `start_after` starts no process and gives up when the diagnosis stops."""
    task = load_task(None, "fp8-dual-gemm", small=True)
    settings = Settings(task=task, stages=("test",), budgets=stage_budgets(90, {}), sample_repeats=2,
                        sample_seconds=0.5)
    runner = StageRunner(settings)
    src = (FIXTURES / "sleep_import.py").read_text().replace("time.sleep(3)", "time.sleep(40)")
    up, stop = DeviceUp(), threading.Event()
    base, held = Run(id="r0", probe=None), Run(id="r1", probe=None)
    threads = [threading.Thread(target=runner.execute, args=(job, lambda r: None, stop)) for job in
               (Job(base, src, ["test"], device_up=up), Job(held, src, ["test"], start_after=threading.Event()))]
    try:
        for t in threads:
            t.start()
        assert up.wait(35), "the device_init phase never ended"
        assert up.up and threads[0].is_alive() and base.stages == []   # set by the phase, not by the stage's end
        stop.set()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        assert held.stages == [] and runner.active_others("x") == []
    finally:
        stop.set()
        runner.close()
