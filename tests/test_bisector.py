"""The bisector on hand-built sessions: no process runs here."""
import json

from diagnose.analysis.causes import bisector
from diagnose.analysis.causes.ddmin import ddmin
from diagnose.analysis.verdict import comparison
from diagnose.session import Role, Session
from diagnose.status import Status
from tests.builders import run, session

US = {"256x4096x7168": 100.0, "512x4096x7168": 120.0}


def analyze(s, removers, fails=None):
    bisector.minimal_set(s, removers,
                         fails or (lambda keep: (_ for _ in ()).throw(AssertionError("no search expected"))))
    bisector.conclude(s)


def crash_base():
    return run("r0", outcome="crash", fail_at="test", site={"file": "x", "line": 7, "func": "custom_kernel"})


def test_single_cause():
    s = session([crash_base(),
                 run("r1", "warmup", "warmup N->1", per_call_us=US),
                 run("r2", "fullgraph", "fullgraph=False", outcome="crash", fail_at="test")])
    analyze(s, ["warmup", "fullgraph"])
    assert [c.suspects for c in s.causes] == [["warmup"]]
    top = s.causes[0]
    assert top.changes_outcome and top.rank == 1 and top.site["line"] == 8
    assert "warmup N->1" in top.narrative and top.confidence == "high"
    assert [c.probe for c in s.cleared] == ["fullgraph"]
    assert s.fix.run == "r1" and s.fix.steady_us > 0


def test_interaction_of_two_found_by_delta_debugging():
    s = session([crash_base(),
                 run("r1", "graph_capture", "capture off", per_call_us={k: v * 1.5 for k, v in US.items()}),
                 run("r2", "compile_mode", "same mode, no CUDA graphs", per_call_us=US),
                 run("r3", "compile_mode", "compile off", per_call_us={k: v + 6 for k, v in US.items()}),
                 run("r4", "warmup", "warmup N->1", outcome="crash", fail_at="test"),
                 run("r5", "fullgraph", "fullgraph=False", outcome="crash", fail_at="test")])
    asked = []

    def fails(keep):   # the planted truth: it fails only while capture and the graph-recording mode are both in
        asked.append(tuple(keep))
        return {"graph_capture", "compile_mode"} <= set(keep)
    analyze(s, ["graph_capture", "compile_mode", "warmup", "fullgraph"], fails)
    top = s.causes[0]
    assert top.suspects == ["graph_capture", "compile_mode"]
    assert "×" in top.narrative and "records its own CUDA graphs" in top.narrative
    assert sorted(c.probe for c in s.cleared) == ["fullgraph", "warmup"]
    assert () in asked    # verified that removing everything fixes it
    assert s.fix.run == "r2"
    costs = {c.toggle: c.delta_us for c in s.fix.costs}
    assert costs["same mode, no CUDA graphs"] == 0 and 5.9 < costs["compile off"] < 6.1
    assert costs["capture off"] > 40


def test_the_specific_mechanism_ranks_above_the_blunt_toggle():
    """Two toggles of one probe fix it alone: the one that names the mechanism leads the narrative; the
    blunt one is listed as an alternative."""
    s = session([crash_base(),
                 run("r1", "compile_mode", "compile off", per_call_us=US),
                 run("r2", "compile_mode", "same mode, no CUDA graphs", per_call_us=US)])
    analyze(s, ["compile_mode"])
    top = s.causes[0]
    assert "same mode, no CUDA graphs fixes it" in top.narrative
    assert top.alternatives == ["compile_mode: compile off"]


def test_hang_with_no_fix_points_at_the_stuck_line_and_blames_no_probe():
    s = session([run("r0", outcome="timeout", fail_at="test", site={"file": "x", "line": 7, "func": "custom_kernel"}),
                 run("r1", "warmup", "warmup N->1", outcome="timeout", fail_at="test"),
                 run("r2", "compile_mode", "compile off", outcome="timeout", fail_at="test")])
    analyze(s, ["warmup", "compile_mode"], fails=lambda keep: True)
    assert len(s.causes) == 1
    c = s.causes[0]
    assert not c.changes_outcome and c.site["line"] == 7 and c.site["file"] == "kernels/sub.py"
    # every variant timed out too: the work itself, at its line, and no suspect
    assert "still running at line 7" in c.narrative and c.suspects == [] and c.kind == "too_slow"
    assert "every variant timed out too" in c.narrative and s.fix is None


def test_healthy_submission_has_no_cause_and_no_fix():
    s = session([run("r0", per_call_us=US),
                 run("r1", "warmup", "warmup N->1", walls=(5, 6, 12), per_call_us=US)])   # faster, but not needed
    analyze(s, ["warmup"], fails=lambda keep: False)
    assert s.causes == [] and s.fix is None and s.cleared == []


def test_noise_is_not_claimed_as_an_effect():
    # the baseline is at risk; a toggle that moves stage times by less than the spread of repeats claims nothing
    base = [run("r0", outcome="at_risk", walls=(5, 10, 190), per_call_us=US, sha="b"),
            run("r0b", outcome="at_risk", walls=(5, 13, 196), per_call_us=US, sha="b", role=Role.REPEAT)]
    for b in base:
        b.stages[-1].status = Status.AT_RISK
    v = [run("r1", "warmup", "warmup N->1", outcome="at_risk", walls=(5, 12, 192), per_call_us=US, sha="v")]
    v[0].stages[-1].status = Status.AT_RISK
    s = session(base + v)
    analyze(s, ["warmup"], fails=lambda keep: False)
    assert [c for c in s.causes if not c.changes_outcome] == []
    saved = comparison.seconds_saved(s, base[0], v[0])
    assert not any(x["claimed"] for x in saved.values())
    assert saved["test"]["noise_s"] >= 3.0    # the baseline's own spread


def test_time_saving_confidence_follows_the_effect_against_the_noise():
    """A time-out whose fix saves far more than the noise is high; a saving barely above the floor is low."""
    budgets = {"compile": 120.0, "test": 6.0, "benchmark": 180.0}
    base = run("r0", outcome="timeout", fail_at="test", walls=(5, 6.0), budgets=budgets)
    big = run("r1", "warmup", "warmup N->1", walls=(5, 2.0, 20), budgets=budgets)
    s = session([base, big])
    analyze(s, ["warmup"])
    assert s.causes[0].confidence == "high"
    small = run("r2", "import_init", "defer import work", walls=(5, 5.55, 20), budgets=budgets)
    base2 = run("r0", outcome="ok", walls=(5, 5.9, 20), budgets=budgets)
    s2 = session([base2, small])
    analyze(s2, [], fails=lambda k: False)
    assert s2.causes == []   # healthy: saving time it does not need is not a cause
    saved = comparison.seconds_saved(s2, base2, small)
    assert saved["test"]["saved_s"] == 0.35 and saved["test"]["claimed"]


def test_ddmin_finds_a_one_minimal_set():
    assert ddmin(list("abcdefgh"), lambda s: {"c", "f"} <= set(s)) == ["c", "f"]
    assert ddmin(list("abcd"), lambda s: "d" in s) == ["d"]


def test_session_round_trips_through_json():
    s = session([crash_base(), run("r1", "warmup", "warmup N->1", per_call_us=US)])
    analyze(s, ["warmup"])
    back = Session.from_dict(json.loads(s.to_json()))
    assert back.to_dict() == s.to_dict()
    assert back.causes[0].confidence == "high" and back.runs[0].outcome == Status.CRASH


def test_a_run_that_skipped_later_stages_is_not_a_fix():
    partial = run("r2", "compile_mode+warmup", "all suspects removed", walls=(5, 10), role=Role.COMBINATION)
    s = session([crash_base(), run("r1", "warmup", "warmup N->1", per_call_us=US), partial])
    analyze(s, ["warmup"], fails=lambda keep: bool(keep))
    assert s.fix.run == "r1"
    assert [c.run for c in s.fix.costs] == ["r1"]


def test_a_toggle_that_never_ran_is_inconclusive_not_cleared():
    """The baseline times out at import; the warmup loop sits in custom_kernel, so the variant times out
    the same way without ever reaching its edited line: nothing about warmup was tested."""
    base = run("r0", outcome="timeout", fail_at="compile", walls=(120,))
    unreached = run("r1", "warmup", "warmup N->1", outcome="timeout", fail_at="compile", walls=(120,),
                    watched=[8], reached=[])
    s = session([base, unreached])
    analyze(s, ["warmup"], fails=lambda keep: True)
    assert s.cleared == []
    (inc,) = s.inconclusive
    assert inc.probe == "warmup" and "failed before reaching L8" in inc.reason
    assert not any("warmup" in c.suspects for c in s.causes)


def test_a_broken_toggle_is_not_weighed():
    base = crash_base()
    broken = run("r1", "import_init", "defer import work", outcome="crash", fail_at="test", watched=[3],
                 site={"file": "x", "line": 3, "func": "<module>"},
                 exception={"type": "NameError", "message": "name '_epilogue' is not defined"})
    s = session([base, broken])
    analyze(s, ["import_init"], fails=lambda keep: True)
    assert s.cleared == [] and s.inconclusive[0].probe == "import_init"
    assert "broke the program" in s.inconclusive[0].reason


def test_a_suspect_is_never_both_a_cause_and_cleared():
    s = session([crash_base(),
                 run("r1", "compile_mode", "compile off", per_call_us=US),
                 run("r2", "compile_mode", "mode=default", outcome="crash", fail_at="test")])
    analyze(s, ["compile_mode"])
    assert s.causes[0].suspects == ["compile_mode"]
    assert "compile_mode" not in [c.probe for c in s.cleared]


def test_a_timeout_outside_the_submissions_code_is_not_called_a_bug_in_it():
    """The deadline found the run in the evaluator's code, with no sample in the submission: the runs
    cannot name what held it, so no cause is stated and the report says why."""
    from diagnose.analysis.verdict import summary
    from diagnose.output import markdown
    from diagnose.status import UNEXPLAINED
    s = session([run("r0", outcome="timeout", fail_at="benchmark")])
    s.probes = [{"name": "warmup", "state": "absent", "why": "no warmup loop", "evidence": {}}]   # the probes looked
    bisector.conclude(s)
    assert s.causes == []
    own = next(i for i in s.inconclusive if i.probe == UNEXPLAINED)
    assert own.evidence == ["r0"] and "first_call:256x512x256" in own.reason and "cannot be named" in own.reason
    s.verdict = summary.verdict(s)
    head = markdown.render(s).splitlines()[:5]
    assert any(line.startswith("- **Top cause:** inconclusive: r0 timed out in benchmark") for line in head)


def test_within_noise_the_fix_that_names_the_mechanism_is_chosen():
    """mode=default measured 1 % faster than 'no CUDA graphs': within run-to-run noise, so the fix is the
    toggle the cause names, and the other one's cost is shown against it."""
    s = session([crash_base(),
                 run("r1", "compile_mode", "mode=default", per_call_us=US),
                 run("r2", "compile_mode", "same mode, no CUDA graphs",
                     per_call_us={k: v * 1.01 for k, v in US.items()}),
                 run("r3", "compile_mode", "compile off", per_call_us={k: v * 1.5 for k, v in US.items()})])
    analyze(s, ["compile_mode"])
    assert s.fix.run == "r2"
    costs = {c.toggle: c.delta_us for c in s.fix.costs}
    assert costs["same mode, no CUDA graphs"] == 0 and -1.2 < costs["mode=default"] < -1.0
    assert costs["compile off"] > 50         # beyond the noise, speed decides: it is not chosen


def test_a_search_at_every_new_shape_is_charged_with_every_first_call():
    """A tuning sweep in custom_kernel: 31 s and 20 s in the first two shapes, then the deadline cuts the third
    at 3 s. The hot spot carries the whole cost, and what the line was inside across the calls names it."""
    from diagnose.analysis.verdict import hotspots
    from diagnose.session import Phase
    base = run("r0", outcome="timeout", fail_at="test", site={"file": "x", "line": 7, "func": "custom_kernel"})
    st = base.stages[1]
    st.phases = [Phase("first_call:a", 3.0, 34.0), Phase("first_call:b", 34.0, 54.0),
                 Phase("first_call:c", 54.0, 57.1, open=True, ok=False)]
    st.phase = "first_call:c"
    st.samples = {"first_call:a": {"lines": {"7": 90, "9": 10}, "mechanisms": {"7|triton_compile": 80}},
                  "first_call:b": {"lines": {"7": 95, "9": 5}, "mechanisms": {"7|triton_compile": 90}},
                  "first_call:c": {"lines": {"7": 57, "9": 43}, "mechanisms": {"7|triton_compile": 20}}}
    h = hotspots.hot_spot(session([base]), base)
    assert h["line"] == 7 and abs(h["seconds"] - 0.57 * 3.1) < 0.01
    over = h["over_first_calls"]
    assert over["calls"] == 3 and abs(over["seconds"] - (0.9 * 31 + 0.95 * 20 + 0.57 * 3.1)) < 0.01
    assert h["mechanism"] == "triton_compile"      # 20 of 57 samples in the cut-off call; 190 of 242 over all
    text = hotspots.describe(h)
    assert "over the 3 first calls of test it ran in, 48.7 s in all" in text, text
    assert "inside Triton compiling a kernel" in text


def test_two_causes_that_each_fail_alone_are_kept_apart_and_need_both_edits():
    """A warmup and a search at each new shape, each over the budget alone: no single toggle fixes it, the run
    that keeps only one of them still fails either way, and only the run without both passes. Two causes, each
    saying it fails alone; never an interaction that 'needs all of' them."""
    from diagnose.analysis.audit.audit import audit
    site = {"file": "/c/submission.py", "line": 8}
    runs = [run("r0", outcome="timeout", fail_at="test", site=site),
            run("r1", "warmup", "warmup N->1", outcome="timeout", fail_at="test", site=site),
            run("r2", "search", "search results pinned", outcome="timeout", fail_at="test", site=site),
            run("r3", "search", "keep warmup", outcome="timeout", fail_at="test", site=site,
                role=Role.COMBINATION, removed=["search"]),
            run("r4", "warmup", "keep search", outcome="timeout", fail_at="test", site=site,
                role=Role.COMBINATION, removed=["warmup"]),
            run("r5", "search+warmup", "all suspects removed", role=Role.COMBINATION, removed=["search", "warmup"])]
    s = session(runs)
    asked = []
    bisector.minimal_set(s, ["warmup", "search"], fails=lambda keep: asked.append(list(keep)) or bool(keep))
    bisector.conclude(s)
    assert s.bisection["minimal"] == ["warmup"] and s.bisection["also"] == [["search"]], asked
    mech = [c for c in s.causes if c.changes_outcome]
    assert [c.suspects for c in mech] == [["warmup"], ["search"]]
    for c in mech:
        assert "one of 2 causes that each fail it on their own" in c.narrative and "r5" in c.evidence
        assert "needs all of" not in c.narrative
    assert audit(s) == [], [str(f) for f in audit(s)]
