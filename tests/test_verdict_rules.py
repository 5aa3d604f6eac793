"""A predicted stage time carries its uncertainty, and no verdict rests on a range that crosses the budget."""
import random

from diagnose.analysis.audit.audit import audit
from diagnose.analysis.verdict import summary
from diagnose.runs import harness
from diagnose.status import Status
from tests.test_renderers import healthy_session


def _sample(n, cv, seed=1):
    rng = random.Random(seed)
    return [1e-4 * (1 + rng.gauss(0, cv)) for _ in range(n)]


def test_the_range_holds_the_prediction_and_narrows_with_more_repeats():
    wall = [0.02] * 10
    short = harness.predict_case(_sample(10, 0.02), wall)
    long = harness.predict_case(_sample(200, 0.02), [0.02] * 200)
    assert short.low_s <= short.seconds <= short.high_s
    assert long.low_s <= long.seconds <= long.high_s
    # the cv of 10 repeats is known far less well than that of 200
    assert (short.high_s - short.low_s) / short.seconds > 2 * (long.high_s - long.low_s) / long.seconds


def test_a_noisy_kernel_runs_to_the_cap_at_both_ends():
    p = harness.predict_case(_sample(30, 0.2), [0.001] * 30)
    assert p.reason == "repeat cap" and p.low_s == p.seconds == p.high_s


def test_a_stage_whose_range_crosses_the_budget_is_inconclusive_not_ok():
    s = healthy_session()
    bench = s.runs[0].stage("benchmark")
    bench.predicted_range = [bench.budget_s * 0.6, bench.budget_s * 1.5]
    bench.message = "inconclusive: predicted 170 s (95 % range 108–270 s) against the 180 s budget"
    s.verdict = summary.verdict(s)
    assert s.verdict.status == Status.INCOMPLETE and s.verdict.stage == "benchmark"
    assert "--full" in s.verdict.note
    assert audit(s) == []


def test_a_stage_the_user_stopped_is_never_a_pass():
    s = healthy_session()
    s.runs[0].stages[-1].status = Status.INTERRUPTED     # the run's own outcome still says ok
    assert s.runs[0].outcome == Status.OK
    s.verdict = summary.verdict(s)
    assert s.verdict.status == Status.INTERRUPTED


def test_check_names_the_reason_it_is_at_risk():
    from diagnose.output.console import check_table
    s = healthy_session()
    risk = {"line": 3, "severity": "error", "message": "capture around a graph-recording compile"}
    lines, passed = check_table(s, [risk], "sub.py", gpu=False)
    assert not passed and lines[-1].endswith("AT RISK[/] (ok, an error-level risk in the source)")
    lines, passed = check_table(s, [], "sub.py", gpu=False)
    assert passed and "PASSED ON CPU" in lines[-1]
