"""On a GPU, a stage whose short timing sample cannot place it against its budget is measured further (more repeats,
then every repeat) until it falls on one side, before check says anything of its time (runs/runner/deeper.py).
Hand-built stage records stand for the GPU's: a kernel measured at a fifth of its budget is SAFE, not AT RISK from
the spread of five repeats, and nothing is INCONCLUSIVE for want of a longer measure."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading

import pytest

from diagnose.analysis.verdict import summary
from diagnose.output.console import Word, check_lines
from diagnose.runs.protocol import Depth
from diagnose.runs.runner.deeper import judge, settle, undecided
from diagnose.runs.runner.stage_facts import predict_stage
from diagnose.session import Phase, StageResult
from diagnose.status import Status
from tests.builders import run, session
from tests.conftest import FIXTURES, ROOT

GPU = [{"k": "env", "cuda_available": True}]


def _bench(rest: float, loops: float, pred: tuple[float, float, float], repeats: int = 5, depth: str = "sample",
           status: str = "ok", budget: float = 60.0) -> StageResult:
    """A benchmark stage as the runner records it on a GPU: `rest` s outside its one timing loop, which took `loops`
    s for `repeats` repeats, and the stopping rule's (seconds, low, high) predicted from them."""
    seconds, low, high = pred
    timing = {"k4096": {"per_call_s": [1e-4] * repeats, "repeat_wall_s": [0.01] * repeats, "depth": depth,
                        "stop_reason": depth, "predicted": {"seconds": seconds, "low_s": low, "high_s": high}}}
    st = StageResult(name="benchmark", status=Status(status), wall_s=rest + loops, charged_s=rest + loops,
                     budget_s=budget, phases=[Phase("torch_import", 0.0, rest), Phase("timing:k4096", rest,
                                                                                      rest + loops)],
                     timing=timing, events=list(GPU))
    if depth == "full":
        st.predicted_s = st.charged_s
    else:
        predict_stage(st)
    return st


def _measured(*deeper: StageResult):
    """A stand-in for the runner's further measure: hands out `deeper` in order and records what it was asked."""
    asked = []

    def measure(changes):
        asked.append(changes)
        return deeper[len(asked) - 1]
    return measure, asked


def _word(bench: StageResult) -> tuple[Word, list]:
    s = session([run("r0", walls=(5.0, 10.0, 11.0))])
    base = s.runs[0]
    for st in base.stages:
        st.events = list(GPU)
    base.stages[2] = bench
    base.settle()
    s.verdict = summary.verdict(s)
    lines, word = check_lines(s, [], "sub.py", gpu=True)
    return word, [str(x) for x in lines]


def test_a_kernel_at_a_fifth_of_its_budget_is_measured_further_and_is_safe():
    """The plain FP8 kernel seen on an H100: predicted 11 s of 60 s, but five repeats' spread put the top of its
    range at 51 s, which with 20 % for a slower runner 'would need 61.5 s of its 60 s': AT RISK from the sample
    alone. Fifty repeats place it (10.5–12.5 s): SAFE, with a wide margin, and no further measure is asked."""
    cold = _bench(3.0, 0.5, (8.0, 6.0, 48.25))
    assert (cold.predicted_s, cold.predicted_range) == (11.0, [9.0, 51.25]) and undecided(cold)
    assert _word(cold)[0] == Word.AT_RISK               # what the sample alone said
    measure, asked = _measured(_bench(2.0, 4.0, (8.2, 7.5, 9.5), repeats=50))
    st = settle(cold, measure)
    judge(st)
    assert asked == [{"sample_repeats": 50, "sample_seconds": 15.0}]
    # its timing loops from the further measure, the rest of its time from the first, cold pass
    assert (st.predicted_s, st.predicted_range, st.status) == (11.2, [10.5, 12.5], Status.OK)
    assert st.timing["k4096"]["per_call_s"] == [1e-4] * 50 and st.phases == cold.phases
    assert "timing measured again (50 repeats a case): a 5-repeat sample's 95 % range (9–51 s)" in st.message
    word, lines = _word(st)
    assert word == Word.SAFE and any("wide margin" in x for x in lines), lines


def test_a_range_that_still_straddles_is_measured_in_full_and_then_falls_on_one_side():
    """A triage row once read 'inconclusive: predicted 15 s (95 % range 9–66 s) against the 60 s budget, from a
    5-repeat sample; run it with --full'. Fifty repeats still straddle; then every repeat runs, as --full does: 23 s
    measured, SAFE. Had the whole stage run out of its budget, that timeout would be its ending: FAILS."""
    cold = _bench(3.0, 0.5, (12.0, 6.0, 63.0))
    assert cold.predicted_range == [9.0, 66.0] and undecided(cold)
    wider = _bench(2.0, 4.0, (14.0, 9.0, 60.0), repeats=50)
    measure, asked = _measured(wider, _bench(2.0, 20.0, (0, 0, 0), repeats=800, depth="full"))
    st = settle(cold, measure)
    judge(st)
    assert asked == [{"sample_repeats": 50, "sample_seconds": 15.0}, {"depth": Depth.FULL}]
    assert (st.predicted_s, st.predicted_range, st.status) == (23.0, [23.0, 23.0], Status.OK), st
    assert "every repeat, as --full" in st.message
    assert _word(st)[0] == Word.SAFE
    over = _bench(2.0, 58.0, (0, 0, 0), repeats=700, depth="full", status="timeout")
    over.message = "exceeded the 60 s budget in timing:k4096"
    measure, _ = _measured(wider, over)
    st = settle(_bench(3.0, 0.5, (12.0, 6.0, 63.0)), measure)
    assert st.status == Status.TIMEOUT and "its timing measured again, every repeat" in st.message
    assert _word(st)[0] == Word.FAILS


def test_a_stage_a_sample_places_is_not_measured_again_and_at_risk_needs_its_whole_range_over():
    """Decided by its sample: a range wholly over the budget is AT RISK; one whose allowance is over the budget at
    both ends is a thin margin, AT RISK (margin); a wide one is SAFE. None asks for a further measure. A further
    measure the user stopped leaves the first one, which then says it could not decide, resting no status on it."""
    for pred, word in (((70.0, 65.0, 80.0), Word.AT_RISK), ((49.0, 48.0, 50.0), Word.AT_RISK),
                       ((5.0, 4.0, 7.0), Word.SAFE)):
        st = _bench(3.0, 0.5, pred)
        measure, asked = _measured()
        st = settle(st, measure)
        judge(st)
        assert asked == [] and _word(st)[0] == word, (pred, st.status, st.message)
    over = _bench(3.0, 0.5, (70.0, 65.0, 80.0))
    judge(over)
    assert over.status == Status.AT_RISK and over.message.startswith("predicted 73 s (95 % range 68–83 s)")
    stopped = threading.Event()
    stopped.set()
    measure, asked = _measured()
    st = settle(_bench(3.0, 0.5, (12.0, 6.0, 63.0)), measure, stopped)
    judge(st)
    assert asked == [] and st.status == Status.OK and st.message.startswith("inconclusive: ")


# the runner as it runs on a GPU (this machine has none: its records stand in), deciding once that the first sample
# cannot place the benchmark stage
_MEASURED_AGAIN = """
import sys
from diagnose.runs.runner import deeper, stages
stages._ran_on_gpu = lambda st: True
asked = iter([True])
deeper.undecided = lambda st: st.name == "benchmark" and next(asked, False)   # not the start check's stage
from diagnose.cli.app import main
main(sys.argv[1:])
"""


@pytest.mark.e2e
def test_the_runner_measures_the_stage_again_in_its_own_container_and_keeps_its_first_cold_time(tmp_path):
    """The real runner's further measure: the benchmark stage's timing loops run again in the same container with
    up to 50 repeats a case (15 s a case at most), and the stage keeps its first pass's phases and the rest of its
    time beside them."""
    out = tmp_path / "o"
    res = subprocess.run([sys.executable, "-c", _MEASURED_AGAIN, "run", str(FIXTURES / "healthy.py"), "--stages",
                          "benchmark", "--budget", "600", "--probes", "none", "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    (bench,) = json.loads((out / "session.json").read_text())["runs"][0]["stages"]
    assert bench["status"] == "ok" and bench["message"].startswith("timing measured again ("), bench["message"]
    # each case ran on past the first sample's bound (10 repeats or 3 s, here) to the further measure's: 50 repeats,
    # or 15 s of repeats (a busy machine's slower repeats can stop a case there with fewer than the first sample had)
    assert re.search(r"a (\d+)-repeat sample's", bench["message"]), bench["message"]
    cases = [(len(t["per_call_s"]), sum(t["repeat_wall_s"])) for t in bench["timing"].values()]
    assert cases and all(n == 50 or (n < 50 and wall > 14.0) for n, wall in cases), cases
    assert bench["predicted_range"][0] <= bench["predicted_s"] <= bench["predicted_range"][1]
