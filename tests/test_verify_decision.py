"""The parent's decision on a stage from the verifier's account, on hand-built records: a stage whose own account is
ok stays ok only if every output it had to keep was kept and judged ok in a process that never ran the submission;
which outputs a stage must keep; and a session from before the verifier still loads. (The real runs behind it:
tests/test_forged_checks.py.)"""
import json

from diagnose.runs.harness import INPUTS_PER_CASE
from diagnose.runs.runner.verify import PASSED, decide, expected_outputs
from diagnose.session import Session, StageResult
from diagnose.status import Status
from diagnose.tasks.loader import load_task
from tests.builders import run, session, stage

TASK = load_task(None, "fp8-dual-gemm", small=True).to_dict()
TEST = expected_outputs(TASK, "test", evaluated=False)


def verified(want: dict, ok: bool = True, missing: bool = False, message: str = "", ms: float = 2.0) -> dict:
    return {"k": "verified", "case": want["case"], "index": want["index"], "ok": ok and not missing,
            "missing": missing, "outputs": 0 if missing else 1, "message": message, "ms": ms, "t": 0.0, "pid": 7}


def decided(events: list[dict], status: str = "ok", failure: str | None = None) -> StageResult:
    st = stage("test", status=status)
    decide(st, TEST, events, wall_s=1.5, failure=failure)
    return st


def test_every_output_kept_and_judged_ok_keeps_the_stage_ok_and_records_its_cost_per_case():
    st = decided([verified(w, ms=3.0 + i) for i, w in enumerate(TEST)] + [{"k": "verify_done", "t": 0.0, "pid": 7}])
    assert st.status == Status.OK and st.message == ""
    assert st.verified["outputs"] == st.verified["expected"] == 3 and st.verified["wall_s"] == 1.5
    assert st.verified["cases"] == {"64x128x256": {"outputs": 1, "ms": 3.0}, "128x64x128": {"outputs": 1, "ms": 4.0},
                                    "32x96x64": {"outputs": 1, "ms": 5.0}}


def test_a_wrong_output_makes_a_passed_stage_wrong_and_says_the_evaluator_passed_it():
    events = [verified(TEST[0]), verified(TEST[1], ok=False, message="8192 of 8192 elements differ"), verified(TEST[2])]
    st = decided(events)
    assert st.status == Status.WRONG and st.phase == "check:128x64x128"
    assert st.message.startswith(f"{PASSED}; the outputs are wrong: check failed on 128x64x128 (output 0)")
    assert st.message.endswith("8192 of 8192 elements differ")
    assert st.verified["wrong"] == [{"case": "128x64x128", "index": 0, "message": "8192 of 8192 elements differ"}]


def test_an_output_that_never_left_the_process_is_tampering_never_a_pass():
    st = decided([verified(TEST[0]), verified(TEST[1], missing=True), verified(TEST[2], missing=True)])
    assert st.status == Status.TAMPERED
    assert "2 of its 3 checked outputs never left that process (the first: 128x64x128 (output 0))" in st.message
    assert st.verified["missing"] == [{"case": "128x64x128", "index": 0}, {"case": "32x96x64", "index": 0}]


def test_a_verifier_that_could_not_judge_every_output_is_no_pass():
    """It died after the first output: the other two were never judged. A verdict for an output the stage never
    had to keep (another case's, a forged one) stands for none of those it had to."""
    stray = {**verified(TEST[0]), "case": "9999x1x1"}
    st = decided([verified(TEST[0]), stray], failure="ended (signal SIGKILL) before it had judged every output")
    assert st.status == Status.CRASH and st.phase == "verify" and st.verified["unjudged"] == 2
    assert st.message == (f"{PASSED}, but its outputs could not be verified: the verifier ended (signal SIGKILL) "
                          f"before it had judged every output")


def test_a_stage_that_already_failed_keeps_its_own_verdict():
    st = decided([verified(w) for w in TEST], status="timeout")
    assert st.status == Status.TIMEOUT and st.verified["outputs"] == 3


def test_which_outputs_each_stage_must_keep():
    """The test stage: each case's one output. The benchmark and the leaderboard: each ranked case's first and last
    of its 50, the last made with seed + 42 * 49. A problem's own evaluator: each case's first (in its benchmarks,
    of the case's shape)."""
    assert [(w["case"], w["index"], w["kwargs"]["seed"]) for w in TEST] == [
        ("64x128x256", 0, 1111), ("128x64x128", 0, 1112), ("32x96x64", 0, 1113)]
    bench = expected_outputs(TASK, "benchmark", evaluated=False)       # ranked by the geometric mean: every case
    assert [(w["case"], w["index"], w["kwargs"]["seed"]) for w in bench] == [
        ("64x256x512", 0, 2221), ("64x256x512", INPUTS_PER_CASE - 1, 2221 + 42 * 49),
        ("128x128x256", 0, 2222), ("128x128x256", INPUTS_PER_CASE - 1, 2222 + 42 * 49)]
    last = {**TASK, "ranking_by": "last"}
    # an evaluator may seed a benchmark's inputs its own way: any seed of the case's shape answers it
    assert [(w["case"], w["index"], w["match"]) for w in expected_outputs(last, "leaderboard", evaluated=True)] == [
        ("128x128x256", 0, "shape")]
    assert {w["match"] for w in TEST + bench + expected_outputs(TASK, "test", evaluated=True)} == {"exact"}


def test_a_session_from_before_the_verifier_still_loads_and_a_new_one_round_trips():
    old = session([run("r0")]).to_dict()
    for r in old["runs"]:
        for st in r["stages"]:
            del st["verified"]
    assert all(st.verified is None for r in Session.from_dict(old).runs for st in r.stages)
    new = session([run("r0")])
    decide(new.runs[0].stages[-1], TEST, [verified(w) for w in TEST], wall_s=0.5)
    again = Session.from_dict(json.loads(new.to_json()))
    assert again.runs[0].stages[-1].verified == new.runs[0].stages[-1].verified


def test_a_checked_copy_taken_before_the_kernel_filled_its_output_buffer_is_kept(tmp_path):
    """pmpp_v2's benchmark: `check_copy = _clone_data(data)` of (A, B, C) before `custom_kernel(data)` writes C in
    place, then `check_implementation(check_copy, output)`. The copy matches the input by neither identity nor
    content (C was filled since); it is the latest input of its shape, and its output is kept under its arguments.
    On an H200 this case was 'never left that process' until the Keeper fell back on the shape."""
    import json

    import torch

    from diagnose.runs.worker.outputs import Keeper
    keeper = Keeper({"dir": str(tmp_path), "cases": [{"size": 4, "seed": 7}]})
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    data = (a, b, torch.zeros(4, 4))
    keeper.remember(data, {"size": 4, "seed": 7})
    check_copy = tuple(x.clone() for x in data)
    data[2][...] = a + b        # the kernel writes its output into the input's buffer
    keeper.checked(check_copy, data[2])
    kept = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert [k["kwargs"] for k in kept] == [{"size": 4, "seed": 7}]
    # an input of another shape is never taken for it
    other = Keeper({"dir": str(tmp_path / "o"), "cases": [{"size": 4, "seed": 7}]})
    (tmp_path / "o").mkdir()
    other.remember(data, {"size": 4, "seed": 7})
    other.checked((torch.zeros(5, 5), torch.zeros(5, 5), torch.zeros(5, 5)), torch.zeros(5, 5))
    assert list((tmp_path / "o").glob("*.json")) == []
