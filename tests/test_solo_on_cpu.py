"""On a CPU the runs share the CPU itself: a timing judgment (a variant's timeout, a pass within the noise of its
budget) made while other work took time from the stage waits for a solo rerun, and that rerun decides the variant,
so that one file's diagnosis does not change with the machine's load. On a GPU the rule is the one it was (who
shared the GPU: tests/test_timing_solo.py).

The quick tests build the records by hand; the e2e test diagnoses a real submission whose fix runs close to its
budget, once on a quiet machine and once beside a CPU burner the test starts, and wants the same diagnosis."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from diagnose.analysis.audit.audit import audit
from diagnose.analysis.causes import bisector, fix_choice
from diagnose.analysis.verdict import evidence, summary
from diagnose.session import Role
from diagnose.status import Status
from tests.builders import run, session
from tests.conftest import FIXTURES, cli

LOAD = 20.0      # seconds other work took from a stage: past the 9 s noise floor of a 180 s budget


def _on(r, gpu: bool = False):
    """The run's stages as a worker records them: its first event says whether it had a GPU."""
    for st in r.stages:
        if st.status != Status.SKIPPED:
            st.events.insert(0, {"k": "env", "cuda_available": gpu})
    return r


def _base(gpu=False):
    return _on(run("r0", outcome="timeout", fail_at="test", walls=(5, 180, 20)), gpu)


def _fix(rid="r1", outcome="ok", delay=0.0, gpu=False, test_s=60.0, role=None, overlapped=()):
    """The warmup toggle: ok (its test stage in `test_s`), or a timeout in test."""
    r = run(rid, "warmup", "warmup N->1", outcome=outcome, fail_at="test" if outcome != "ok" else None,
            walls=(5, 180 if outcome != "ok" else test_s, 20), delay=delay, role=role, overlapped=overlapped)
    if role == Role.CONFIRM:
        r.confirms = "r1"
    return _on(r, gpu)


def _concluded(runs):
    s = session(runs)
    bisector.conclude(s)
    s.verdict = summary.verdict(s)
    return s


def test_a_cpu_stage_that_lost_time_to_other_work_needs_a_solo_rerun_and_a_gpu_stage_is_judged_as_before():
    loaded = _fix(outcome="timeout", delay=LOAD).stage("test")
    assert evidence.loaded(loaded) and evidence.needs_solo(loaded) and evidence.doubt(loaded)
    quiet = _fix(outcome="timeout", delay=1.0).stage("test")
    assert not evidence.loaded(quiet) and not evidence.needs_solo(quiet) and evidence.doubt(quiet) is None
    # a thin pass that lost time to other work waits too, a wide one does not (alone it would only be faster)
    thin = _fix(delay=LOAD, test_s=175.0).stage("test")
    assert evidence.needs_solo(thin) and not evidence.needs_solo(_fix(delay=LOAD).stage("test"))
    # on a GPU the CPU time it waited for does not make a timing judgment wait: the runs on its GPU do
    gpu = _fix(outcome="timeout", delay=LOAD, gpu=True).stage("test")
    assert not evidence.loaded(gpu) and not evidence.needs_solo(gpu)


def test_a_variants_timeout_under_load_is_decided_by_its_solo_rerun_to_the_quiet_machines_diagnosis():
    quiet = _concluded([_base(), _fix()])
    assert [c.suspects for c in quiet.causes] == [["warmup"]] and quiet.fix.run == "r1" and audit(quiet) == []
    # beside other work the fix ran out: the engine asks for its solo rerun before anything rests on it
    loaded = _concluded([_base(), _fix(outcome="timeout", delay=LOAD)])
    assert "r1" in [r.id for r in fix_choice.doubtful_evidence(loaded)] and loaded.fix is None
    # alone (other programs' load stays in it: no rerun takes that away) it passed: the rerun decides, as quietly
    s = _concluded([_base(), _fix(outcome="timeout", delay=LOAD), _fix("c1", delay=LOAD, role=Role.CONFIRM)])
    e = evidence.effective(s, s.run("r1"))
    assert e.outcome == Status.OK and e.confirmed and not e.flaky and "decided by its solo rerun c1" in e.note
    assert [c.suspects for c in s.causes] == [["warmup"]] and s.fix.toggle == quiet.fix.toggle and s.fix.run == "c1"
    top = s.causes[0].narrative
    assert "warmup N->1 fixes it" in top and "its solo rerun c1, with no other run beside it, decided" in top, top
    assert s.verdict.status == quiet.verdict.status and audit(s) == [], [str(f) for f in audit(s)]
    assert fix_choice.doubtful_evidence(s) == []
    # alone it ran out too: no fix, and the warmup toggle is judged from that rerun (confirmed, not flaky)
    s = _concluded([_base(), _fix(outcome="timeout", delay=LOAD), _fix("c1", "timeout", role=Role.CONFIRM)])
    assert s.fix is None and evidence.effective(s, s.run("r1")).confirmed and audit(s) == []


def test_on_a_gpu_a_variant_that_passed_only_alone_stays_flaky():
    s = _concluded([_base(True), _fix(outcome="timeout", delay=LOAD, gpu=True),
                    _fix("c1", gpu=True, role=Role.CONFIRM)])
    assert evidence.decider(s, s.run("r1")).id == "r1" and evidence.effective(s, s.run("r1")).flaky
    assert s.fix is None


def test_a_thin_pass_under_load_waits_then_is_said_from_the_solo_rerun_and_the_audit_holds_it_there():
    s = _concluded([_base(), _fix(delay=LOAD, test_s=175.0)])
    why = next(i.reason for i in s.inconclusive if i.probe == "warmup")
    assert "test lost 20.0 s to other work: whether its pass is within the noise of its 180 s budget waits for a " \
           "solo rerun" in why, why
    assert s.fix is None and "r1" in [r.id for r in fix_choice.doubtful_evidence(s)] and audit(s) == []
    # alone it passed with room: the fix stands, judged from the rerun
    s = _concluded([_base(), _fix(delay=LOAD, test_s=175.0), _fix("c1", test_s=120.0, role=Role.CONFIRM)])
    assert s.fix is not None and [c.suspects for c in s.causes] == [["warmup"]] and audit(s) == []
    # alone it was thin too: said from the rerun, and the audit wants that rerun in the session
    s = _concluded([_base(), _fix(delay=LOAD, test_s=175.0), _fix("c1", test_s=176.0, role=Role.CONFIRM)])
    said = next(i for i in s.inconclusive if i.probe == "warmup")
    assert said.evidence == ["c1"], said
    assert said.reason == ("warmup N->1: test passed in 176.0 s of 180 s, 4.0 s to spare, within the ±9.00 s noise "
                           "floor (alone on the CPU, in c1): at risk, not a fix"), said.reason
    assert s.fix is None and audit(s) == [], [str(f) for f in audit(s)]
    s.runs = [r for r in s.runs if r.id != "c1"]
    assert "timing-solo" in {f.rule for f in audit(s)}
    # a thin pass said of a run that lost time to other work, with no solo rerun: the audit refuses it
    s = _concluded([_base(), _fix(delay=LOAD, test_s=175.0), _fix("c1", test_s=176.0, role=Role.CONFIRM)])
    s.run("c1").role = Role.SINGLE
    s.run("c1").stage("test").contention.run_delay_s = LOAD
    found = [f.missing for f in audit(s) if f.rule == "timing-solo"]
    assert found and "test was measured while other work took 20.0 s of its CPU time" in found[0], found


# --- end to end: a real diagnosis, beside a CPU burner and quiet --------------------------------------------------

NEAR = FIXTURES / "warmup" / "near_budget.py"
# The budget over the fix's test stage alone beside the burner: it fits alone, with room. On a 2-core machine that
# others kept busy, the fix's solo rerun took up to 1.4 times what the same run took a minute before.
ROOM = 1.8


def _fix_alone(tmp_path) -> float:
    """The fixed submission's test stage, run alone here now: what the fix costs under the load of this moment."""
    fixed = tmp_path / "fixed.py"
    fixed.write_text(NEAR.read_text().replace("WARMUP_ITERS = 10", "WARMUP_ITERS = 1"))
    # with the probe's hooks, as the diagnosis runs it (one pass leaves the probe no toggle: only this run)
    res = cli("run", fixed, "--stages", "test", "--budget", "120", "--probes", "warmup", "--out", tmp_path / "cal",
              timeout=200)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads((tmp_path / "cal" / "session.json").read_text())["runs"][0]["stages"][0]["charged_s"]


def _diagnose(out, budget: float) -> dict:
    # three runs at a time: the toggles share the CPU with the baseline too, as on a machine with the cores for it
    res = cli("run", NEAR, "--stages", "test", "--budget", f"{budget:g}", "--probes", "warmup", "--jobs", "3",
              "--out", out, timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    audited = cli("report", out / "session.json", "--audit")
    assert audited.returncode == 0, audited.stdout + audited.stderr
    return json.loads((out / "session.json").read_text())


def _said(s: dict) -> tuple:
    return s["verdict"]["status"], [c["suspects"] for c in s["causes"]], s["fix"] and s["fix"]["toggle"]


def _decided(s: dict) -> list[tuple[dict, dict]]:
    """Each toggle's run whose time-based ending was in doubt, with the solo rerun that decided it."""
    runs = {r["id"]: r for r in s["runs"]}
    return [(runs[r["confirms"]], r) for r in s["runs"]
            if r["role"] == "confirm" and runs[r["confirms"]]["role"] == "single"]


@pytest.mark.e2e
def test_a_fix_close_to_its_budget_gets_the_same_diagnosis_beside_a_cpu_burner(tmp_path):
    """The budget follows the load: the fix's test stage measured alone beside the burner, with 80 % to spare, so
    that alone it fits even then, and the baseline (five times its work) never does. Beside the baseline, the other
    toggle and the burner, the toggles' time is in doubt: each solo rerun decides its toggle, and the diagnosis is the
    one without the burner."""
    t0 = time.monotonic()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        alone_s = _fix_alone(tmp_path)
        budget = max(3.0, round(ROOM * alone_s, 1))
        busy = _diagnose(tmp_path / "busy", budget)
    finally:
        for p in burners:
            p.kill()
            p.wait()
    quiet = _diagnose(tmp_path / "quiet", budget)
    assert _said(busy) == _said(quiet) == ("timeout", [["warmup"]], "warmup N->1"), (_said(busy), _said(quiet))
    decided = _decided(busy)
    # three passes ran out beside the others while the burner took CPU time from them: its solo rerun decided that
    assert any(first["toggle"] == "warmup N->3" and first["outcome"] == "timeout" for first, _ in decided), decided
    for first, alone in decided:
        assert alone["solo"] and alone["stages"][0]["contention"]["overlapped"] == [], alone
        assert first["stages"][0]["contention"]["run_delay_s"] > 0.25 or first["outcome"] == "ok", first
    fixed = next(r for r in busy["runs"] if r["id"] == busy["fix"]["run"])
    if fixed["role"] == "confirm":      # the fix's own run was in doubt beside the others: its solo rerun is the fix
        assert f"its solo rerun {fixed['id']}, with no other run beside it, decided" in busy["causes"][0]["narrative"]
    def said(f, a):
        lost = f["stages"][0]["contention"]["run_delay_s"]
        return (f"{a['toggle']} {a['outcome']} in {a['stages'][0]['wall_s']:.1f} s alone ({f['id']}: {f['outcome']} "
                f"in {f['stages'][0]['wall_s']:.1f} s, {lost:.1f} s lost)")
    print(f"budget {budget:g} s (the fix alone beside the burner: {alone_s:.1f} s); decided by solo reruns: "
          f"{', '.join(said(f, a) for f, a in decided)}; the fix from {fixed['id']}; {time.monotonic() - t0:.0f} s")
