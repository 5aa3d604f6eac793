"""An edit is credited with what it removed. A warmup loop whose count is worked out by a call
(`for _ in range(_warmup_steps(r1, r2))`) loses both its passes and the call when the count is cut: the warmup probe
runs the two apart (the count cut with the call still made; the call gone with the count kept), the cause names the
one the runs show, and the audit (rule edit-parts) fails a cause that credits the count where the call was what
mattered, or where no run took the two apart."""
from __future__ import annotations

import json

import pytest

from diagnose.analysis.audit.audit import audit
from diagnose.analysis.causes import bisector
from diagnose.analysis.verdict import summary
from diagnose.session import Session
from diagnose.source.edits import unified_diff
from probes.base import PlanContext
from probes.door import scan as scan_source
from probes.warmup import probe as warmup
from tests.builders import run, session
from tests.conftest import FIXTURES, cli

SRC = "\n".join([
    "import torch",                          # 1
    "",                                      # 2
    "",                                      # 3
    "def steps(x):",                         # 4
    "    return 3",                          # 5
    "",                                      # 6
    "",                                      # 7
    "def custom_kernel(data):",              # 8
    "    for _ in range(steps(data)):",      # 9
    "        torch.mm(data, data)",          # 10
    "    return data",                       # 11
]) + "\n"
SITE = {"file": "/tmp/x/submission.py", "line": 5, "func": "steps"}


def _stack(r, lines: dict) -> None:
    for st in r.stages:
        if st.samples:
            st.samples = {"first_call:256x512x256": {"stack": {str(k): v for k, v in lines.items()}}}


def count_call_session(apart: bool = True, labels: bool = True):
    """A baseline that timed out inside `steps(data)` in the warmup's count (3 s on L9, the passes nothing), and the
    warmup probe's variants: both taken away (passed); with `apart`, the count cut with the call kept (still timed
    out) and the call gone with the count kept at 3 (passed). `labels=False`: the runs a version that did not run
    them apart made (one edit, labelled as the count alone)."""
    plan = warmup.plan(PlanContext(SRC, scan_source(SRC), False))
    both, count, call = plan.toggles
    runs = [run("r0", outcome="timeout", fail_at="test", site=SITE)]
    _stack(runs[0], {9: 300, 4: 300, 5: 300})
    for rid, t, ok in [("r1", both, True)] + ([("r2", count, False), ("r3", call, True)] if apart else []):
        r = run(rid, "warmup", t.label if labels else "warmup N->1", outcome="ok" if ok else "timeout",
                fail_at=None if ok else "test", site=None if ok else SITE, variant=unified_diff(SRC, t.apply(SRC)))
        _stack(r, {10: 2} if ok else {9: 300, 4: 300, 5: 300})
        runs.append(r)
    s = session(runs, scan=scan_source(SRC).to_list())
    s.submission["source"] = SRC
    s.probes = [{"name": "warmup", "state": "run", "why": plan.why, "evidence": plan.evidence if labels else {},
                 "toggles": [t.label for t in plan.toggles]}]
    bisector.minimal_set(s, ["warmup"], fails=lambda keep: bool(keep))
    bisector.conclude(s)
    s.verdict = summary.verdict(s)
    return s


def _parts(s) -> list[str]:
    return [str(f) for f in audit(s) if f.rule == "edit-parts"]


def test_the_runs_apart_credit_the_call_and_the_audit_holds_the_cause_to_them():
    s = count_call_session()
    (c,) = s.causes
    assert c.narrative.startswith("The call `steps(data)` in the warmup loop's count causes the timeout: "
                                  "`steps(data)` not called, warmup N kept at 3 fixes it."), c.narrative
    assert "with the call kept and one pass, r2 ended timeout" in c.narrative and \
        "the call costs, not the count" in c.narrative, c.narrative
    assert s.fix.run == "r3" and audit(s) == [], [str(f) for f in audit(s)]
    # the same runs, with the cause crediting the count: r2 kept the call, cut the count, and still timed out
    c.narrative = "The warmup iteration count causes the timeout: warmup N->1, dropping `steps(data)` fixes it."
    (f,) = _parts(s)
    assert "r2 (warmup N->1, `steps(data)` still called) cut the count and kept the call, and still failed" in f, f


def test_one_edit_that_took_away_two_things_says_so_where_no_run_took_them_apart():
    s = count_call_session(apart=False)
    (c,) = s.causes
    assert c.narrative.startswith("One edit of the warmup loop's count that took away two things (the count and the "
                                  "call `steps(data)` in it) causes the timeout"), c.narrative
    assert "no run took them apart" in c.narrative and audit(s) == [], [str(f) for f in audit(s)]
    # the report issue 47 showed: one edit, labelled and credited as the count
    old = count_call_session(apart=False, labels=False)
    assert old.causes[0].narrative.startswith("The warmup iteration count causes the timeout")
    (f,) = _parts(old)
    assert "r1 (warmup N->1) took away the call `steps(data)` at L9 with the count, no run kept one without the " \
           "other" in f, f


@pytest.mark.e2e
def test_a_count_edit_that_took_away_a_slow_call_is_credited_to_the_call_in_a_real_diagnosis(tmp_path):
    """`_warmup_steps` burns 2.5 s a shape and answers 3; the three passes are cheap. Three test shapes run over a
    6 s budget; one pass with the call kept still times out, and three passes without the call pass in about 1.5 s
    (the budget leaves it four times that)."""
    out = tmp_path / "o"
    res = cli("run", FIXTURES / "warmup" / "calibrated_count.py", "--stages", "test", "--budget", "6", "--probes",
              "warmup", "--out", out)
    s = json.loads((out / "session.json").read_text())
    assert res.returncode == 1 and s["verdict"]["status"] == "timeout", res.stdout
    runs = {r["toggle"]: r for r in s["runs"] if r["role"] == "single"}
    call = "`_warmup_steps(r1, r2)`"
    assert runs[f"warmup N->1, {call} still called"]["outcome"] == "timeout", runs.keys()
    assert runs[f"{call} not called, warmup N kept at 3"]["outcome"] == "ok"
    top = s["causes"][0]
    assert top["suspects"] == ["warmup"] and top["narrative"].startswith(
        f"The call {call} in the warmup loop's count causes the timeout: {call} not called, warmup N kept at 3 "
        "fixes it."), top["narrative"]
    assert "the call costs, not the count" in top["narrative"] and "iteration count causes" not in top["narrative"]
    assert s["fix"]["toggle"] == f"{call} not called, warmup N kept at 3" and "+        for _ in range(3):" in \
        s["fix"]["diff"], s["fix"]
    audit_ = cli("report", out / "session.json", "--audit")
    assert audit_.returncode == 0 and "are supported" in audit_.stdout, audit_.stdout
    # the same session crediting the count, as before this rule: the audit names the run that kept the call
    saved = Session.from_dict(s)
    saved.causes[0].narrative = f"The warmup iteration count causes the timeout: warmup N->1, dropping {call} fixes it."
    assert any("cut the count and kept the call, and still failed" in f for f in _parts(saved)), _parts(saved)


def test_a_count_from_a_library_call_that_took_no_time_is_cut_as_before_and_a_kept_call_still_runs():
    env = SRC.replace("range(steps(data))", "range(int(os.environ.get('N', '10')))").replace("import torch",
                                                                                            "import os\nimport torch")
    plan = warmup.plan(PlanContext(env, scan_source(env), False))
    assert [t.label for t in plan.toggles] == ["warmup N->1", "warmup N->3"] and "calls" not in plan.evidence
    # the count cut with its call kept: the call still runs, once, and the loop makes one pass
    kept = warmup.set_count(SRC, 1, headers=("for _ in range(steps(data)):",), keep=True)
    assert "    for _ in range((steps(data), 1)[-1]):" in kept.splitlines()
    made: list = []
    ns = {"made": made}
    exec(kept.replace("import torch", "import types\ntorch = types.SimpleNamespace(mm=lambda a, b: made.append(a))")
         .replace("    return 3", "    made.append('steps')\n    return 3"), ns)
    ns["custom_kernel"](7)
    assert made == ["steps", 7], made
