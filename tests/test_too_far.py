"""How far a stage is from its budget, and where the time goes: the harness's timing of a case (repeats, what one
costs, how much of it the calls are), and work paid at every new shape."""
from diagnose.analysis.verdict.too_far import how_far
from diagnose.session import Phase, StageResult
from diagnose.status import Status


def _timed_stage(status=Status.AT_RISK) -> StageResult:
    """As an H100 benchmark measured it: one case's ten repeats with one outlier (cv 219 %), 28 ms a repeat of
    which the 50 calls are 0.55 ms; predicted to run to the 1000-repeat cap."""
    per_call = [1.1e-5] * 9 + [2.5e-4]
    timing = {"64x256x512": {"per_call_s": per_call, "repeat_wall_s": [0.028] * 10,
                             "predicted": {"repeats": 1000, "seconds": 28.0, "reason": "repeat cap", "cv": 2.19}},
              "128x128x256": {"per_call_s": [1.0e-5] * 10, "repeat_wall_s": [0.026] * 10,
                              "predicted": {"repeats": 13, "seconds": 0.35, "reason": "relative error", "cv": 0.003}}}
    return StageResult(name="benchmark", status=status, budget_s=12.0, predicted_s=34.8, timing=timing,
                       phases=[Phase("torch_import", 0, 5.0), Phase("timing:64x256x512", 5.0, 6.0)])


def test_a_case_the_stopping_rule_runs_to_its_cap_says_how_far_off_what_a_repeat_costs_and_what_would_fit():
    text = how_far(_timed_stage())
    assert text.startswith("benchmark needs about 2.9× its 12 s budget (35 s predicted)"), text
    assert "the largest share is 64x256x512, 28 s" in text and "1,000-repeat cap" in text and "cv 219.0%" in text
    assert "28.0 ms a repeat, of which its 50 calls take 0.55 ms (11.0 µs each)" in text, text
    assert "the harness's own step" in text
    # 12 s less the other 6.8 s leaves 5.2 s: 185 repeats of 28 ms, reached with a spread under sqrt(185) x 0.1 %
    assert "to fit, 64x256x512 has 5 s, 185 repeats at that cost" in text and "spread under 1.4%" in text, text


def test_a_stage_within_its_budget_or_one_that_passed_says_nothing():
    st = _timed_stage(status=Status.OK)
    assert how_far(st) is None
    st = _timed_stage()
    st.predicted_s = 8.0
    for t in st.timing.values():
        t["predicted"]["seconds"] = 1.0
    assert how_far(st) is None


def test_work_at_every_new_shape_is_projected_over_the_stages_shapes():
    """Two first calls of 4 s finished, the third was cut off; the stage has 3 cases and 3 s of start-up."""
    st = StageResult(name="test", status=Status.TIMEOUT, budget_s=12.0, phase="first_call:c",
                     phases=[Phase("torch_import", 0, 3.0), Phase("first_call:a", 3.0, 7.0),
                             Phase("first_call:b", 7.0, 11.0), Phase("first_call:c", 11.0, 12.0, open=True)])
    text = how_far(st, shapes=3, line=41)
    assert text.startswith("test needs about 1.2× its 12 s budget wherever it runs"), text
    assert "4.0 s a shape at line 41 over the 2 that finished, and it has 3 shape(s)" in text, text
    st.phases = [Phase("torch_import", 0, 3.0), Phase("first_call:a", 3.0, 12.0, open=True)]
    st.phase = "first_call:a"
    assert "ran out 9.0 s into its first shape's first call" in how_far(st), how_far(st)
