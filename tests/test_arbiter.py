"""Timing sections run alone: the parent pauses every other run meanwhile, and never charges it for that."""
import threading
import time

import pytest

from diagnose.runs.harness import stage_budgets
from diagnose.runs.runner import Job
from diagnose.runs.runner.arbiter import GpuArbiter
from diagnose.runs.runner.stages import StageRunner
from diagnose.runs.settings import Settings
from diagnose.session import Run, StageResult, union_seconds
from diagnose.status import Status
from diagnose.tasks.loader import load_task
from tests.conftest import FIXTURES, cpu_slowdown


def test_a_section_pauses_the_others_in_arrival_order():
    arb, log = GpuArbiter(), []
    for name in "abc":
        arb.register(name, lambda on, n=name: log.append((n, "stop" if on else "cont")))
    granted = []
    arb.acquire("a", lambda: granted.append("a"))
    assert granted == ["a"] and sorted(log) == [("b", "stop"), ("c", "stop")]
    arb.acquire("b", lambda: granted.append("b"))      # queued behind a, and still paused
    time.sleep(0.2)
    log.clear()
    arb.release("a")
    assert granted == ["a", "b"]
    # between two sections everyone runs again for a moment; then all but the new holder are paused
    last = {n: ev for n, ev in log}
    assert last == {"a": "stop", "b": "cont", "c": "stop"}
    arb.release("b")
    assert 0.19 < arb.held_up("b") < 1.0             # paused, then queued: counted once
    assert arb.held_up("a") < 0.05
    arb.register("d", lambda on: log.append(("d", on)))
    arb.acquire("c", lambda: granted.append("c"))
    assert ("d", True) in log                          # a newcomer during a section is paused at once
    arb.forget("c")                                   # the holder died: the others resume
    assert ("d", False) in log
    assert union_seconds([(0, 2), (1, 3), (5, 6)]) == 4


def test_the_preferred_runs_request_is_granted_before_those_queued_ahead_of_it():
    """The leading fix's run (engine/fix_order.py) is preferred: its sections go first, the rest in arrival order."""
    arb, granted = GpuArbiter(), []
    for name in ("r1/benchmark", "r2/benchmark", "r3/benchmark", "r2/leaderboard"):
        arb.register(name, lambda on: None)
    arb.prefer("r2")
    arb.acquire("r1/benchmark", lambda: granted.append("r1"))       # the machine is free: granted at once
    arb.acquire("r3/benchmark", lambda: granted.append("r3"))
    arb.acquire("r2/benchmark", lambda: granted.append("r2"))       # asked last, served next
    arb.release("r1/benchmark")
    arb.release("r2/benchmark")
    arb.release("r3/benchmark")
    assert granted == ["r1", "r2", "r3"]
    arb.prefer("r9")        # another run leads now: r2 waits its turn like the others
    arb.acquire("r1/benchmark", lambda: granted.append("r1 again"))
    arb.acquire("r3/benchmark", lambda: granted.append("r3 again"))
    arb.acquire("r2/leaderboard", lambda: granted.append("r2 again"))
    arb.release("r1/benchmark")
    arb.release("r3/benchmark")
    assert granted[3:] == ["r1 again", "r3 again", "r2 again"]


def test_the_time_a_stage_was_held_up_counts_a_pause_inside_a_wait_once_and_no_overrun():
    """As an H100 recompile storm recorded it: paused while queued (the same 15 s twice), then its own timing
    section outlived its hold (an overrun). Held up 15 s, not 30: the report's 'queued' and its charge agree."""
    st = StageResult(name="benchmark", status=Status.TIMEOUT, wall_s=27.13, charged_s=12.13,
                     lock_waits=[{"start_s": 2.0, "seconds": 15.0, "mode": "wait"},
                                 {"start_s": 2.0, "seconds": 15.0, "mode": "pause"},
                                 {"start_s": 20.0, "seconds": 3.0, "mode": "overrun"}])
    assert st.lock_wait_s == 15.0 == round(st.wall_s - st.charged_s, 4)


def _paused_b(budget: float) -> tuple[Run, Run]:
    """Run A times 50 slow calls per repeat (about 11 s alone on the machine per section); run B starts during A's
    first section with `budget` for its test stage. Returns (A, B) once both have ended."""
    task = load_task(None, "fp8-dual-gemm", small=True)
    budgets = {**stage_budgets(60, {}), "test": budget}
    # no compile step: B's stage itself must overlap A's timing sections
    settings = Settings(task=task, stages=("test", "benchmark"), budgets=budgets, sample_repeats=2,
                        sample_seconds=0.5, compile_step=False)
    timing = threading.Event()

    def watch(run, stage, ev):
        if run.id == "a" and ev["k"] == "begin" and ev["name"].startswith("timing:"):
            timing.set()
    runner = StageRunner(settings, concurrent=True, on_event=watch)
    a, b = Run(id="a", probe=None), Run(id="b", probe=None)
    stop = threading.Event()
    ta = threading.Thread(target=runner.execute, args=(Job(a, (FIXTURES / "slow_calls.py").read_text(),
                                                            ["benchmark"]), lambda r: None, stop))
    ta.start()
    try:
        assert timing.wait(120), "run A never reached its timing section"
        runner.execute(Job(b, (FIXTURES / "slow_first_call.py").read_text(), ["test"]), lambda r: None, stop)
    finally:
        ta.join()
        runner.close()
    return a, b


@pytest.mark.e2e
def test_a_run_paused_for_another_runs_timing_is_not_charged_for_it():
    """Run B needs about 3 s of its own (import and 3 x 0.5 s of CPU) and is paused for the rest of A's first timing
    section (more than 9 s) on top of it, so its wall time passes a budget that its own time fits: it must still
    pass, charged only for its own time.

    The budget must lie between B's own time and its wall time, and on a busy machine both move while the test
    runs (measured at its start, the load missed a machine that grew busier: B's own time passed 10 s; measured as
    B started, it overshot the wall). So the first try's budget follows the load at the start, and a try where the
    machine put the budget outside that span is tried again with it in the middle of what that try measured. Were
    B charged for its pause, its charge would be its wall time, no budget would lie between, and every try fails."""
    budget, tries = max(10.0, 6.0 * cpu_slowdown()), []
    for _ in range(3):
        a, b = _paused_b(budget)
        st = b.stage("test")
        tries.append((round(budget, 1), st.status, st.wall_s, st.charged_s))
        assert a.outcome == Status.OK, a.stages[0].message
        if b.outcome == Status.OK and st.wall_s > budget > st.charged_s:
            break
        # outside the span: its middle, as this try measured it (a timed-out B's own time is at least its budget)
        budget = (st.charged_s + st.wall_s) / 2 if b.outcome == Status.OK else 3 * budget
    paused = sum(w["seconds"] for w in st.lock_waits if w["mode"] == "pause")
    assert b.outcome == Status.OK, (st.message, tries)
    assert paused > 9.0, st.lock_waits                  # A's timing sections paused it for seconds
    assert st.wall_s > budget > st.charged_s, tries     # more wall time than the budget, never charged for it
    assert abs(st.charged_s - (st.wall_s - paused)) < 0.2
    first_calls = [p for p in st.phases if p.name.startswith("first_call:")]
    # its own 1.5 s of CPU work (a few times that on a busy machine); a pause inside one, left in, would add 9 s or
    # more: at most half of what B was charged
    assert 1.3 < sum(p.seconds for p in first_calls) < max(8.0, st.charged_s - 1.0)
