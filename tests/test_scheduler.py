"""The run pool's rules: priority order, the reserve kept for deciding work, solo jobs."""
import threading
import time

from diagnose.engine.scheduler import Scheduler


def _running_probe(sched, prio, started, release, solo=False):
    def job():
        started.append((prio, time.monotonic()))
        release.wait(10)
    return sched.submit(job, prio, solo=solo)


def _wait_until(pred, timeout=5.0):
    end = time.monotonic() + timeout
    while not pred() and time.monotonic() < end:
        time.sleep(0.01)
    return pred()


def test_background_work_leaves_the_reserve_free_until_it_is_dropped():
    stop, release, started = threading.Event(), threading.Event(), []
    sched = Scheduler(4, stop, background=3, reserve=2)
    try:
        futs = [_running_probe(sched, 3, started, release) for _ in range(4)]
        assert _wait_until(lambda: len(started) == 2)
        time.sleep(0.5)
        assert len(started) == 2, started                     # two of four workers kept for deciding work
        deciding = _running_probe(sched, 1, started, release)
        assert _wait_until(lambda: len(started) == 3) and started[-1][0] == 1
        sched.set_reserve(0)                                  # the causes stand: costing may use every worker
        assert _wait_until(lambda: len(started) == 4)
        release.set()
        for f in [*futs, deciding]:
            f.result(5)
        assert len(started) == 5
    finally:
        release.set()
        sched.close()


def test_a_solo_job_runs_with_nothing_beside_it():
    stop, release, started = threading.Event(), threading.Event(), []
    sched = Scheduler(3, stop)
    try:
        first = _running_probe(sched, 1, started, release)
        assert _wait_until(lambda: len(started) == 1)
        solo = _running_probe(sched, 0, started, release, solo=True)
        later = _running_probe(sched, 1, started, release)
        time.sleep(0.5)
        assert len(started) == 1, started                      # the solo job waits for the running one
        release.set()
        for f in (first, solo, later):
            f.result(5)
        assert [p for p, _ in started] == [1, 0, 1]            # the solo job first, then the rest
    finally:
        release.set()
        sched.close()


def test_the_policy_alone_decides_who_starts():
    """ReservePolicy without a thread: a solo job waits for an empty pool and holds it; background work leaves the
    reserve free."""
    from diagnose.engine.policy import ReservePolicy
    p = ReservePolicy(3, background=3, reserve=1)
    assert p.may_start(3, False)
    p.started(3, False)
    assert p.may_start(3, False) and not p.may_start(0, True)      # a solo job waits for the one running
    p.started(3, False)
    assert not p.may_start(3, False) and p.may_start(0, False)     # the last worker is kept for deciding work
    p.ended(3, False)
    p.ended(3, False)
    p.started(0, True)
    assert not p.may_start(0, False) and not p.may_start(0, True)  # nothing starts beside a solo job
    p.ended(0, True)
    assert p.may_start(5, False)


def test_the_pool_runs_what_its_policy_lets_start():
    """Another policy plugs into the same pool: one that lets nothing start until it is opened."""
    from diagnose.engine.policy import ReservePolicy

    class Gate(ReservePolicy):
        opened = False

        def may_start(self, priority, solo):
            return self.opened and super().may_start(priority, solo)
    stop, gate = threading.Event(), Gate(2)
    sched = Scheduler(2, stop, policy=gate)
    try:
        fut = sched.submit(lambda: "ran", 0)
        time.sleep(0.3)
        assert not fut.done()
        gate.opened = True                 # the pool asks again at least every 0.2 s
        assert fut.result(timeout=5) == "ran"
    finally:
        sched.close()
