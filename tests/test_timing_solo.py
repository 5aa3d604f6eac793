"""A timing judgment rests on a stage measured alone on its GPU: at risk, "needs N× its budget", and a pass within
the noise of its budget. Measured beside other runs on the GPU, the report says how many shared it and that the
judgment waits for a solo rerun, and the engine asks for that rerun; the audit's timing-solo rule holds a saved
session to it."""
import pytest

from diagnose.analysis.audit.audit import audit
from diagnose.analysis.causes import bisector, fix_choice
from diagnose.analysis.verdict import evidence, summary
from diagnose.output.console import Word, check_lines
from diagnose.session import Phase, Role, StageResult
from diagnose.status import Compared, Status
from tests.builders import run, session, stage
from tests.test_renderers import US
from tests.test_too_far import _timed_stage


def _at_risk(beside=("r7", "r8"), gpu_shared=None):
    """The benchmark predicted at 250 s (95 % range 230–270 s) against its 180 s budget."""
    st = stage("benchmark", "at_risk", wall=100.0, predicted=250.0, per_call_us=US, overlapped=beside,
               message="predicted 250 s (95 % range 230–270 s) against the 180 s budget, from a 10-repeat sample")
    st.predicted_range = [230.0, 270.0]
    st.contention.gpu_shared = None if gpu_shared is None else list(gpu_shared)
    return st


def _base(beside=("r7", "r8"), gpu_shared=None):
    r = run("r0", per_call_us=US)
    r.stages[2] = _at_risk(beside, gpu_shared)
    r.settle()
    return r


def _solo(status="at_risk", rid="c1"):
    c = run(rid, role=Role.CONFIRM, per_call_us=US)
    c.confirms = "r0"
    c.stages[2] = _at_risk(beside=()) if status == "at_risk" else stage("benchmark", wall=100.0, per_call_us=US)
    c.settle()
    return c


def _concluded(runs):
    s = session(runs)
    bisector.conclude(s)
    s.verdict = summary.verdict(s)
    return s


def test_only_runs_on_the_stages_own_gpu_share_it():
    st = _at_risk(beside=("r7", "r8"), gpu_shared=[])       # both ran on the other GPU
    assert evidence.sharers(st) == [] and evidence.doubt(st) is None
    st = _at_risk(beside=("r7", "r8"), gpu_shared=["r8"])
    assert evidence.sharers(st) == ["r8"] and "beside 1 other run on its GPU" in evidence.doubt(st)
    # a session from before the GPU was recorded: every run alive counts
    assert evidence.sharers(_at_risk(beside=("r7", "r8"))) == ["r7", "r8"]


def test_at_risk_beside_other_runs_on_the_gpu_is_not_stated_and_waits_for_a_solo_rerun():
    s = _concluded([_base()])
    v = s.verdict
    assert v.status == Status.INCOMPLETE and not v.confirmed, v
    assert v.message == ("inconclusive: benchmark shared its GPU with 2 other runs: whether it is at risk waits "
                         "for a solo rerun"), v.message
    assert s.causes == [] and audit(s) == [], [str(f) for f in audit(s)]
    # the engine asks for the rerun, up to that stage
    assert [r.id for r in fix_choice.doubtful_evidence(s)] == ["r0"]
    # measured with its GPU to itself (the other runs on another GPU), the judgment stands on its own run
    s = _concluded([_base(gpu_shared=[])])
    assert s.verdict.status == Status.AT_RISK and s.verdict.runs == ["r0"] and audit(s) == []


def test_a_solo_rerun_that_is_at_risk_too_is_what_the_verdict_rests_on():
    s = _concluded([_base(), _solo()])
    v = s.verdict
    assert v.status == Status.AT_RISK and v.confirmed and v.runs == ["r0", "c1"], v
    assert "confirmed by a solo rerun (c1)" in v.note and audit(s) == [], [str(f) for f in audit(s)]
    assert fix_choice.doubtful_evidence(s) == []
    # alone it passed: at risk only beside the others, and the verdict says so
    s = _concluded([_base(), _solo("ok")])
    assert s.verdict.status == Status.OK and "at_risk beside other runs, ok when run alone" in s.verdict.message


def at_risk_beside():
    """A session that states AT RISK from a benchmark measured beside two other runs on its GPU, with no solo
    rerun (as one concluded before the rule)."""
    s = _concluded([_base(), _solo()])
    s.runs = [s.baseline]
    s.verdict.runs = ["r0"]
    return s


def test_the_audit_fails_an_at_risk_stated_from_a_stage_that_shared_its_gpu():
    s = at_risk_beside()
    found = [f for f in audit(s) if f.rule == "timing-solo"]
    assert [f.claim for f in found] == ["verdict"], [str(f) for f in audit(s)]
    assert "benchmark was measured beside 2 other run(s) on its GPU" in found[0].missing


def _too_slow(beside=("r1", "r2")):
    """The benchmark times out in every run, its timed case running to the repeat cap (as the H200 report)."""
    def timed(rid, probe=None, toggle=None, role=None, shared=beside):
        r = run(rid, probe, toggle, outcome="timeout", fail_at="benchmark", role=role, per_call_us=US)
        st = _timed_stage(status=Status.TIMEOUT)
        st.contention.overlapped = list(shared)
        st.phase, st.budget_s, st.message = "timing:64x256x512", 12.0, "timeout here"
        r.stages[2] = st
        return r
    return timed


def test_needs_n_times_its_budget_is_said_only_from_a_stage_measured_alone():
    timed = _too_slow()
    runs = [timed("r0"), timed("r1", "warmup", "warmup N->1"), timed("r2", "compile_mode", "compile off")]
    s = _concluded(runs)
    said = s.causes[0].narrative
    assert "needs about" not in said and "cv " not in said, said
    assert "benchmark shared its GPU with 2 other runs: how far it is from its budget waits for a solo rerun" in said
    assert audit(s) == [], [str(f) for f in audit(s)]
    assert "r0" in [r.id for r in fix_choice.doubtful_evidence(s)]
    # with the baseline's solo rerun, the figure is said, from that run, and named
    alone = timed("c1", role=Role.CONFIRM, shared=())
    alone.confirms = "r0"
    s = _concluded(runs + [alone])
    said = s.causes[0].narrative
    assert "benchmark needs about 2.9× its 12 s budget" in said and "(measured alone on its GPU in c1)" in said, said
    assert audit(s) == [], [str(f) for f in audit(s)]
    # the audit: the same sentence with the rerun gone from the session is unsupported
    s.runs = [r for r in s.runs if r.id != "c1"]
    assert "timing-solo" in {f.rule for f in audit(s)}, [str(f) for f in audit(s)]


def _thin_pass(rid="r1", beside=("r0",), margin=0.1):
    """The warmup toggle passes every stage, its benchmark `margin` s inside its 180 s budget."""
    r = run(rid, "warmup", "warmup N->1", per_call_us=US, overlapped=beside)
    st = r.stage("benchmark")
    st.charged_s = st.wall_s = st.budget_s - margin
    return r


def _crash_base():
    return run("r0", outcome="crash", fail_at="benchmark", site={"file": "/tmp/x/submission.py", "line": 7})


def test_a_pass_within_the_noise_beside_other_runs_is_no_fix_and_waits_for_a_solo_rerun():
    s = _concluded([_crash_base(), _thin_pass()])
    assert s.fix is None and bisector.compare(s, s.baseline, s.run("r1")) == Compared.THIN
    why = next(i.reason for i in s.inconclusive if i.probe == "warmup")
    assert "r1 passed, but benchmark shared its GPU with 1 other run: whether its pass is within the noise of its " \
           "180 s budget waits for a solo rerun" in why and "noise floor" not in why, why
    assert "r1" in [r.id for r in fix_choice.doubtful_evidence(s)] and audit(s) == []
    # alone it passed inside the noise too: now that is said, from the solo rerun
    alone = _thin_pass("c1", beside=())
    alone.role, alone.confirms = Role.CONFIRM, "r1"
    s = _concluded([_crash_base(), _thin_pass(), alone])
    why = next(i.reason for i in s.inconclusive if i.probe == "warmup")
    assert "within the ±9.00 s noise floor (alone on its GPU, in c1): at risk, not a fix" in why, why
    assert audit(s) == [], [str(f) for f in audit(s)]
    # the audit: that sentence with the solo rerun gone is unsupported
    s.runs = [r for r in s.runs if r.id != "c1"]
    assert "timing-solo" in {f.rule for f in audit(s)}


def test_check_defers_a_thin_margin_measured_beside_other_runs():
    """On a GPU, benchmark's 170 s of 180 s needs 204 s with the allowance: AT RISK alone, INCONCLUSIVE beside
    another run on its GPU (no solo rerun)."""
    for beside, want in (((), Word.AT_RISK), (("r1",), Word.INCONCLUSIVE)):
        r = run("r0", per_call_us=US, overlapped=beside)
        r.stage("benchmark").charged_s = r.stage("benchmark").wall_s = 170.0
        s = _concluded([r])
        lines, word = check_lines(s, [], "sub.py", gpu=True)
        assert word == want, lines[-1]
        if beside:
            assert "benchmark shared its GPU with 1 other run: whether its time fits its budget waits for a solo " \
                   "rerun" in lines[-1], lines[-1]


@pytest.mark.e2e
def test_the_runner_counts_only_runs_on_the_same_gpu():
    from diagnose.runs.runner.stages import StageRunner
    from diagnose.runs.settings import Settings
    from diagnose.tasks.loader import load_task
    runner = StageRunner(Settings(task=load_task(None, "fp8-dual-gemm", small=True), stages=("test",),
                                  gpu_ids=("0", "1")))
    try:
        for rid in ("r0", "r1", "r2", "r3"):      # placed on the less loaded GPU in turn: 0, 1, 0, 1
            runner.container(rid)
        assert runner.same_gpu("r0", ["r1", "r2", "r3"]) == ["r2"]
        assert runner.same_gpu("r1", ["r0", "r2", "r3"]) == ["r3"]
    finally:
        runner.close()


def test_a_stage_whose_phase_is_no_first_call_it_recorded_says_nothing_of_how_far():
    st = StageResult(name="test", status=Status.TIMEOUT, budget_s=12.0, phase="first_call:z",
                     phases=[Phase("torch_import", 0, 3.0), Phase("first_call:a", 3.0, 12.0, open=True)])
    assert evidence.far(session([run("r0")]), run("r0"), st) is None


def test_the_engine_reruns_an_at_risk_baseline_alone_and_states_the_verdict_from_that_rerun():
    from tests.test_engine import STORM, diagnose, ok

    def script(r):
        bench = ok("benchmark", predicted=90.0, overlapped=() if r.role == Role.CONFIRM else ["r1"],
                   status="at_risk", message="predicted 90 s (95 % range 80–100 s) against the 60 s budget")
        bench.predicted_range = [80.0, 100.0]
        return [ok("compile"), ok("test"), bench, ok("leaderboard")]
    s, runner = diagnose(STORM, script, jobs=3, probes=[])
    confirm = [j for j in runner.jobs if j["role"] == "confirm"]
    assert confirm and all(j["solo"] and j["beside"] == [] for j in confirm), runner.jobs
    alone = next(r for r in s.runs if r.role == Role.CONFIRM)
    assert s.verdict.status == Status.AT_RISK and s.verdict.confirmed and s.verdict.runs == ["r0", alone.id]
    assert audit(s) == [], [str(f) for f in audit(s)]


def _example(name: str):
    import json

    from diagnose.session import Session
    from tests.conftest import ROOT
    path = ROOT / "reports" / "examples" / name / "session.json"
    return Session.from_dict(json.loads(path.read_text(encoding="utf-8")))


def _concluded_without(s, run_id: str):
    """The session concluded again as if `run_id` had never run (the state before the engine's solo rerun)."""
    from diagnose.analysis.causes import bisector
    s.runs = [r for r in s.runs if r.id != run_id]
    bisector.conclude(s)
    return s


def test_an_autotune_fix_near_its_budget_beside_another_run_waits_for_a_solo_rerun():
    """Measured on an H200 (reports/examples/triton-autotune-at-budget): the one-config autotune pin r1 passed its
    benchmark stage, predicted 11.4 s of 13 s while the compile-step variant shared the GPU (the same fix predicted
    11.0 to 15.6 s in such runs). Before its solo rerun, whether it fits is a timing judgment that waits: the
    engine asks for that rerun, and neither a fix nor "did not fix it" is stated."""
    from diagnose.analysis.causes.fix_choice import doubtful_evidence
    s = _concluded_without(_example("triton-autotune-at-budget"), "r3")
    bench = s.run("r1").stage("benchmark")
    assert s.run("r1").outcome == "ok" and bench.predicted_s < bench.budget_s and bench.contention.gpu_shared
    assert "r1" in [r.id for r in doubtful_evidence(s)]
    top = s.causes[0].narrative
    assert "whether its 11.4 s (predicted) fits its 13 s budget on a GPU of its own waits for a solo rerun" in top, top
    assert "the strategies tried did not fix it" not in top and s.fix is None


def test_the_solo_rerun_decides_the_autotune_fix_at_13_and_at_20_s():
    """The same H200 runs with their solo reruns (r3, no other run on the GPU): at a 13 s budget the fix's benchmark is
    predicted 14.4 s alone, so the pass is at risk and no fix is verified; at 20 s it is predicted 17.2 s alone, clear
    of the noise floor, and the fix stands, judged from r3."""
    at = _example("triton-autotune-at-budget")
    assert not at.run("r3").stage("benchmark").contention.gpu_shared and at.fix is None
    top = at.causes[0].narrative
    assert "at risk: benchmark is predicted 14.4 s against its 13 s budget (alone on its GPU, in r3)" in top, top
    near = _example("triton-autotune-near-budget")
    assert near.fix is not None and near.fix.run == "r1" and near.fix.steady_us
    assert not near.run("r3").stage("benchmark").contention.gpu_shared
    assert 17.0 < near.run("r3").stage("benchmark").predicted_s < near.run("r3").stage("benchmark").budget_s
