"""The audit catches every rule when it is broken: hand-edited sessions, each breaking one rule of a
session that passes. (Every session a test writes is audited by conftest's `audited` fixture.)"""
import copy
import json

import pytest

from diagnose.analysis.audit import RULES, audit
from diagnose.analysis.findings import Cause, Cleared
from diagnose.status import Confidence, Status
from tests.conftest import cli
from tests.test_renderers import healthy_session, interaction_session


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
    return out


@pytest.mark.parametrize("rule,s", _broken(), ids=[r for r, _ in _broken()])
def test_each_rule_is_caught_when_broken(rule, s):
    assert rule in rules(s), [str(f) for f in audit(s)]


def test_every_rule_has_a_case():
    assert sorted(r for r, _ in _broken()) == sorted(RULES)


def test_a_compile_that_never_happened_cannot_clear_compile_mode():
    s = interaction_session()
    s.runs[0].stages[0].compile = []
    s.cleared.append(Cleared(probe="compile_mode", toggles=["compile off"], outcome=Status.CRASH,
                             narrative="compile off: still crash", evidence=["r0", "r2"]))
    s.causes = [Cause(rank=1, suspects=["graph_capture"], kind="mechanism", narrative="", confidence=Confidence.HIGH,
                      changes_outcome=True, evidence=["r0", "r1"])]
    found = [f for f in audit(s) if f.rule == "cleared-acted"]
    assert found and "nothing for the toggle to remove" in found[0].missing


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
    from diagnose.analysis.audit import audit_claims
    for rule, s in _broken():
        checked, loose = audit_claims(s)
        assert not loose, (rule, loose)
        assert any(found for _, found in checked), rule
