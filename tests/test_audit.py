"""The audit catches every rule when it is broken: hand-edited sessions, each breaking one rule of a
session that passes. (Every session a test writes is audited by conftest's `audited` fixture.)"""
import copy
import json

import pytest

from diagnose.analysis.audit.audit import RULES, audit
from diagnose.analysis.causes import bisector
from diagnose.analysis.verdict import summary
from diagnose.findings import Cause, Cleared
from diagnose.session import Role, StageResult
from diagnose.status import Confidence, Status
from tests.builders import run, session
from tests.conftest import cli
from tests.test_renderers import US, healthy_session, interaction_session


def rules(s) -> set[str]:
    return {f.rule for f in audit(s)}


def test_sessions_the_tool_concludes_pass():
    assert audit(interaction_session()) == [] and audit(healthy_session()) == []


def _broken():
    """(rule, session breaking only it) for every rule."""
    out = []

    s = interaction_session()
    s.verdict.status = Status.TIMEOUT       # the runs crashed
    out.append(("verdict-runs", s))

    s = healthy_session()
    s.runs[0].stages[-1].status = Status.INTERRUPTED
    out.append(("ok-finished", s))

    s = interaction_session()
    s.causes[0].evidence.append("r99")
    out.append(("claim-runs", s))

    s = interaction_session()
    warm = next(c for c in s.cleared if c.probe == "warmup")
    s.run(warm.evidence[1]).watched, s.run(warm.evidence[1]).stages[0].reached = [8], []
    out.append(("cleared-acted", s))

    s = interaction_session()
    s.cleared.append(Cleared(probe="graph_capture", toggles=["capture off"], outcome=Status.CRASH,
                             narrative="capture off: still crash", evidence=["r0", "r1"]))
    out.append(("cleared-blamed", s))

    s = interaction_session()
    s.verdict.site = {**s.verdict.site, "line": 8}     # the warmup loop's own line, and warmup is cleared
    out.append(("cleared-site", s))

    s = interaction_session()
    s.causes[0].confirmed, s.causes[0].confidence = False, Confidence.HIGH
    out.append(("high-confirmed", s))

    s = interaction_session()
    s.run(s.fix.run).stages[-1].status = Status.TIMEOUT
    out.append(("fix-passes", s))

    s = interaction_session()
    top = s.causes[0]
    s.fix.steady_us, s.fix.probe = None, "fullgraph"
    s.fix.costs = [c for c in s.fix.costs] + [copy.copy(s.fix.costs[0])]
    s.fix.costs[-1].probe = top.suspects[0]
    out.append(("fix-cause", s))

    s = healthy_session()
    s.harness["cpu_only"] = True
    s.runs[0].stages[-1].status = Status.AT_RISK
    out.append(("cpu-not-judged", s))

    s = healthy_session()
    bench = s.runs[0].stage("benchmark")
    bench.predicted_range = [bench.budget_s * 0.5, bench.budget_s * 2]
    out.append(("prediction-range", s))

    s = healthy_session()
    s.runs[0].stage("benchmark").predicted_s = s.runs[0].stage("benchmark").budget_s * 1.3   # "passed" over it
    out.append(("figure-budget", s))

    s = interaction_session()
    cost = next(c for c in s.fix.costs if c.steady_us is not None and c.run != s.fix.run)
    s.run(cost.run).stages = [st for st in s.run(cost.run).stages if st.name != "benchmark"]
    out.append(("cost-measured", s))

    s = interaction_session()     # an alternative said not run though, ten times faster, the choice would reach it
    from diagnose.analysis.causes.fix_choice import NOT_NEEDED
    alt = next(c for c in s.fix.costs if c.steady_us is not None and c.run != s.fix.run)
    s.run(alt.run).stages.append(StageResult("leaderboard", Status.SKIPPED, message=NOT_NEEDED))
    alt.not_run = ["leaderboard"]
    for timing in s.run(alt.run).stage("benchmark").timing.values():
        timing["per_call_s"] = [x / 10 for x in timing["per_call_s"]]
    out.append(("chosen-before", s))

    s = interaction_session()     # the capture's own toggle crashed as the baseline did: nothing got past it
    s.runs[1] = run("r1", "graph_capture", "capture off", outcome="crash", fail_at="test")
    out.append(("cause-fixes", s))

    s = interaction_session()     # no run kept both suspects and failed
    s.causes[0].evidence = [r for r in s.causes[0].evidence if r not in ("r0", "r4")]
    out.append(("cause-interaction", s))

    s = all_timeout_session()
    s.runs[1] = run("r1", "warmup", "warmup N->1", walls=(5, 10, 20))    # one variant passed after all
    out.append(("cause-all-failed", s))

    s = all_crash_session()
    s.runs[1] = run("r1", "warmup", "warmup N->1", walls=(5, 10, 20))
    out.append(("cause-unchanged", s))

    s = all_timeout_session()     # "too slow wherever it runs", but one variant ran the submission unchanged
    s.runs[1].source_sha, s.runs[1].switches = s.runs[0].source_sha, []
    out.append(("untaken", s))

    s = interaction_session()     # the warmup toggle crashed later, in another stage: not "still the same"
    s.runs[3] = run("r3", "warmup", "warmup N->1", outcome="crash", fail_at="benchmark")
    out.append(("cleared-same", s))

    s = interaction_session()
    s.fix.steady_us += 10.0
    out.append(("figure-equal", s))

    s = interaction_session()     # the fix's run imported a helper from a path on this machine
    s.run(s.fix.run).stages[0].state = {"outside": [{"op": "read", "path": "/home/me/dev/helper.py"}]}
    out.append(("outside-state", s))

    s = interaction_session()     # warmup cleared on a run that died in torch's import, before the submission ran
    st = s.run("r3").failed_stage
    st.phase, st.events = "torch_import", [{"k": "worker_error", "type": "ModuleNotFoundError",
                                            "message": "No module named 'torch'"}]
    out.append(("reached-submission", s))

    s = interaction_session()     # said to have lost its pool worker, but it raised an Exception the pool hands back
    st = s.run("r3").failed_stage
    st.status, st.lost_worker, st.exit_code = Status.TIMEOUT, {"how": "signal SIGSEGV", "phase": st.phase}, 1
    st.events = [{"k": "exception", "type": "RuntimeError", "escapes": False}]
    out.append(("lost-worker", s))

    s = interaction_session()     # killed by a signal in its first call, in the pool worker, and called a crash
    s.run("r3").failed_stage.signal = "SIGSEGV"
    out.append(("lost-worker", s))

    s = interaction_session()     # the warmup cleared on a run that ran the submission unchanged
    s.run("r3").source_sha = s.run("r0").source_sha
    out.append(("cleared-effect", s))

    s = interaction_session()     # ... on a run whose warmup loop took as long as the baseline's
    s.runs[3] = run("r3", "warmup", "warmup N->1", outcome="crash", fail_at="test", acted=False)
    out.append(("cleared-effect", s))

    s = interaction_session()     # ... on a run that crashed at another line than the baseline
    s.run("r3").failed_stage.site = {**SITE, "line": 8}
    out.append(("cleared-effect", s))

    s = interaction_session()     # the capture's fix credited on a run that still captured around the compile
    s.runs[1] = run("r1", "graph_capture", "capture off", acted=False,
                    per_call_us={k: v * 1.5 for k, v in US.items()})
    out.append(("fix-credit", s))

    s = interaction_session()     # the warmup's toggle edits the statement the search probe pins: one suspect
    s.runs.append(run("r6", "search", "search results pinned", outcome="crash", fail_at="test",
                      variant=WARMUP_EDIT))
    s.runs[3].variant = WARMUP_EDIT
    s.causes[0].suspects = ["warmup", "search"]
    out.append(("one-suspect", s))

    s = interaction_session()     # the fix passed 0.1 s inside its 180 s budget
    st = s.run(s.fix.run).stage("test")
    st.charged_s = st.wall_s = st.budget_s - 0.1
    out.append(("fix-margin", s))

    s = no_probe_session()        # `check` ran no probe, yet says what probes found (as check said before issue 47)
    s.inconclusive = []
    s.causes = [Cause(rank=1, suspects=[], kind="bug", confidence=Confidence.HIGH, changes_outcome=False,
                      evidence=["r0"], narrative="The submission fails (crash: boom) at line 7 in test; no probe "
                                                 "found a suspect to toggle: the cause is in that code itself.")]
    out.append(("no-probe-claims", s))

    s = no_probe_session()        # ... or clears a suspect no toggle ever took away
    s.cleared.append(Cleared(probe="warmup", toggles=["warmup N->1"], outcome=Status.CRASH,
                             narrative="warmup N->1: still crash", evidence=["r0"]))
    out.append(("no-probe-claims", s))

    from tests.test_count_calls import count_call_session
    s = count_call_session()      # the call in the warmup's count was what mattered, yet the cause credits the count
    s.causes[0].narrative = "The warmup iteration count causes the timeout: warmup N->1 fixes it."
    out.append(("edit-parts", s))

    s = interaction_session()     # every probe ran, yet it says the cause was not looked for
    s.inconclusive.append(no_probe_session().inconclusive[0])
    out.append(("no-probe-claims", s))

    from tests.test_timing_solo import at_risk_beside  # at risk, from a stage that shared its GPU
    out.append(("timing-solo", at_risk_beside()))
    from tests.test_negative_claims import broken  # what a sentence says is not there, shown false by its records
    return out + broken()


def no_probe_session():
    """`diagnose check`: the baseline alone, no probe planned, a crash at line 7."""
    s = session([run("r0", outcome="crash", fail_at="test", site=SITE)])
    s.command = ["diagnose", "check", "/abs/kernels/sub.py", "--problems-root", "rk", "-b", "60", "-o", "out", "-q"]
    bisector.conclude(s)
    s.verdict = summary.verdict(s)
    return s


def test_a_session_that_ran_no_probe_names_the_failure_and_says_its_cause_was_not_looked_for():
    from diagnose.status import NOT_LOOKED
    s = no_probe_session()
    assert audit(s) == [], [str(f) for f in audit(s)]
    assert s.causes == [] and s.cleared == [] and s.fix is None
    (said,) = s.inconclusive
    assert said.probe == NOT_LOOKED and said.evidence == ["r0"] and said.site["line"] == 7
    assert said.reason.startswith("The submission crashed in test (first_call:256x512x256) at kernels/sub.py line 7;")
    # the command that would look: the user's own inputs, the file as the report names it, and no --out or --quiet
    assert "`diagnose run kernels/sub.py --problems-root rk -b 60` would look for it" in said.reason
    assert "probe found" not in said.reason and "that code itself" not in said.reason


@pytest.mark.parametrize("command,want", [
    (["diagnose", "check", "x.py", "--budget=60", "-pnone", "--out=o", "-v"],
     "diagnose run kernels/sub.py --budget=60"),
    (["diagnose", "run", "--probes", "none", "x.py", "--stages", "test", "--fix", "f.py"],
     "diagnose run kernels/sub.py --stages test --fix f.py"),
    (["diagnose", "bisect", "good.py", "bad.py"], "diagnose run kernels/sub.py"),
    ([], "diagnose run kernels/sub.py")])
def test_the_run_command_keeps_the_users_inputs_and_drops_what_stops_it_looking(command, want):
    from diagnose.analysis.causes.not_looked import run_command
    s = no_probe_session()
    s.command = command
    assert run_command(s) == want


# the warmup loop of builders.SOURCE (L8) cut to one pass
WARMUP_EDIT = ("--- a/submission.py\n+++ b/submission.py\n@@ -8,1 +8,1 @@\n-    for _ in range(10): f(data)\n"
               "+    for _ in range(1): f(data)\n")


def _concluded(runs):
    s = session(runs)
    bisector.minimal_set(s, ["warmup", "compile_mode"], fails=lambda keep: True)
    bisector.conclude(s)
    s.verdict = summary.verdict(s)
    return s


def all_timeout_session():
    """Every run times out in test, the variants included, and all suspects removed together too."""
    return _concluded([run("r0", outcome="timeout", fail_at="test", site=SITE),
                       run("r1", "warmup", "warmup N->1", outcome="timeout", fail_at="test"),
                       run("r2", "compile_mode", "compile off", outcome="timeout", fail_at="test"),
                       run("r3", "compile_mode+warmup", "all suspects removed", outcome="timeout", fail_at="test",
                           role=Role.COMBINATION)])


def all_crash_session():
    return _concluded([run("r0", outcome="crash", fail_at="test", site=SITE),
                       run("r1", "warmup", "warmup N->1", outcome="crash", fail_at="test"),
                       run("r2", "compile_mode", "compile off", outcome="crash", fail_at="test")])


SITE = {"file": "/tmp/x/submission.py", "line": 7, "func": "custom_kernel"}


def test_runs_that_all_failed_conclude_no_fix_and_no_interaction():
    s = all_timeout_session()
    assert audit(s) == [], [str(f) for f in audit(s)]
    assert [c.kind for c in s.causes] == ["too_slow"] and s.fix is None
    assert "every variant timed out too" in s.causes[0].narrative and "fixes" not in s.causes[0].narrative
    assert set(s.causes[0].evidence) == {"r0", "r1", "r2", "r3"}


def test_a_failure_that_only_came_later_is_no_fix():
    """Removing the warmup moved the timeout into the benchmark: it neither fixes it nor is cleared."""
    s = _concluded([run("r0", outcome="timeout", fail_at="test", site=SITE),
                    run("r1", "warmup", "warmup N->1", outcome="timeout", fail_at="benchmark")])
    assert audit(s) == [], [str(f) for f in audit(s)]
    assert not any(c.changes_outcome for c in s.causes) and s.fix is None and not s.cleared
    why = next(i.reason for i in s.inconclusive if i.probe == "warmup")
    assert "only later (benchmark/" in why and "fixes nothing" in why


@pytest.mark.parametrize("rule,s", _broken(), ids=[f"{r}-{i}" for i, (r, _) in enumerate(_broken())])
def test_each_rule_is_caught_when_broken(rule, s):
    assert rule in rules(s), [str(f) for f in audit(s)]


def test_every_rule_has_a_case():
    assert sorted({r for r, _ in _broken()}) == sorted(RULES)


def test_a_compile_that_never_happened_cannot_clear_compile_mode():
    s = interaction_session()
    s.runs[0].stages[0].compile = []
    s.cleared.append(Cleared(probe="compile_mode", toggles=["compile off"], outcome=Status.CRASH,
                             narrative="compile off: still crash", evidence=["r0", "r2"]))
    s.causes = [Cause(rank=1, suspects=["graph_capture"], kind="mechanism", narrative="", confidence=Confidence.HIGH,
                      changes_outcome=True, evidence=["r0", "r1"])]
    found = [f for f in audit(s) if f.rule == "cleared-acted"]
    assert found and "nothing for the toggle to remove" in found[0].missing


@pytest.mark.e2e
def test_report_audit_exits_by_what_it_finds(tmp_path):
    good, bad = tmp_path / "good-session.json", tmp_path / "bad-session.json"
    good.write_text(interaction_session().to_json())
    s = interaction_session()
    s.verdict.status = Status.TIMEOUT
    bad.write_text(s.to_json())
    ok = cli("report", good, "--audit")
    assert ok.returncode == 0 and "claim(s) are supported by the session's runs" in ok.stdout, ok.stdout + ok.stderr
    assert "ok          fix (runs " in ok.stdout and "ok          cause 1 (runs r0" in ok.stdout, ok.stdout
    no = cli("report", bad, "--audit")
    assert no.returncode == 1 and "UNSUPPORTED verdict (runs r0" in no.stdout, no.stdout + no.stderr
    assert "[verdict-runs] no stage of r0 ended timeout" in no.stdout, no.stdout
    assert json.loads(bad.read_text())["verdict"]["status"] == "timeout"



def test_every_finding_names_a_claim_the_report_prints():
    from diagnose.analysis.audit.audit import audit_claims
    for rule, s in _broken():
        checked, loose = audit_claims(s)
        assert not loose, (rule, loose)
        assert any(found for _, found in checked), rule
