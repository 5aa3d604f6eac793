"""The bisector on hand-built sessions: no process runs here."""
from diagnose import bisector
from diagnose.session import Session
from tests.builders import run, session

US = {"256x4096x7168": 100.0, "512x4096x7168": 120.0}


def crash_base():
    return run("r0", outcome="crash", fail_at="test", site={"file": "x", "line": 7, "func": "custom_kernel"})


def test_single_cause():
    s = session([crash_base(),
                 run("r1", "warmup", "warmup N->1", per_call_us=US),
                 run("r2", "fullgraph", "fullgraph=False", outcome="crash", fail_at="test")])
    bisector.analyze(s, removers=["warmup", "fullgraph"], fails=lambda keep: (_ for _ in ()).throw(AssertionError))
    assert [c["suspects"] for c in s.causes] == [["warmup"]]
    top = s.causes[0]
    assert top["changes_outcome"] and top["rank"] == 1 and top["site"]["line"] == 8
    assert "warmup N->1" in top["narrative"]
    assert [c["probe"] for c in s.cleared] == ["fullgraph"]
    assert s.fix["run"] == "r1" and s.fix["steady_us"] > 0


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
    bisector.analyze(s, removers=["graph_capture", "compile_mode", "warmup", "fullgraph"], fails=fails)
    top = s.causes[0]
    assert top["suspects"] == ["graph_capture", "compile_mode"]
    assert "×" in top["narrative"] and "records its own CUDA graphs" in top["narrative"]
    assert sorted(c["probe"] for c in s.cleared) == ["fullgraph", "warmup"]
    assert () in asked    # verified that removing everything fixes it
    assert s.fix["run"] == "r2"
    costs = {c["toggle"]: c["delta_us"] for c in s.fix["costs"]}
    assert costs["same mode, no CUDA graphs"] == 0 and 5.9 < costs["compile off"] < 6.1
    assert costs["capture off"] > 40


def test_hang_with_no_fix_points_at_the_stuck_line():
    s = session([run("r0", outcome="timeout", fail_at="test", site={"file": "x", "line": 7, "func": "custom_kernel"}),
                 run("r1", "warmup", "warmup N->1", outcome="timeout", fail_at="test"),
                 run("r2", "compile_mode", "compile off", outcome="timeout", fail_at="test")])
    bisector.analyze(s, removers=["warmup", "compile_mode"], fails=lambda keep: True)
    assert len(s.causes) == 1
    c = s.causes[0]
    assert not c["changes_outcome"] and c["site"]["line"] == 7 and "hangs" in c["narrative"]
    assert c["suspects"] == ["capture"]   # the stuck line lies inside the capture block (L6-7)
    assert s.fix is None


def test_healthy_submission_has_no_cause_and_no_fix():
    s = session([run("r0", per_call_us=US),
                 run("r1", "warmup", "warmup N->1", walls=(5, 6, 12), per_call_us=US)])   # faster, but not needed
    bisector.analyze(s, removers=["warmup"], fails=lambda keep: False)
    assert s.causes == [] and s.fix is None and s.cleared == []


def test_noise_is_not_claimed_as_an_effect():
    # the baseline is at risk; a toggle that moves stage times by less than the spread of repeats claims nothing
    base = [run("r0", outcome="at_risk", walls=(5, 10, 190), per_call_us=US, sha="b"),
            run("r0b", outcome="at_risk", walls=(5, 13, 196), per_call_us=US, sha="b")]
    base[1].switches["repeat"] = 1
    v = [run("r1", "warmup", "warmup N->1", outcome="at_risk", walls=(5, 12, 192), per_call_us=US, sha="v")]
    s = session(base + v)
    bisector.analyze(s, removers=["warmup"], fails=lambda keep: False)
    assert s.causes == []
    saved = bisector.seconds_saved(s, base[0], v[0])
    assert not any(x["claimed"] for x in saved.values())
    assert saved["test"]["noise_s"] >= 3.0    # the baseline's own spread


def test_ddmin_finds_a_one_minimal_set():
    assert bisector.ddmin(list("abcdefgh"), lambda s: {"c", "f"} <= set(s)) == ["c", "f"]
    assert bisector.ddmin(list("abcd"), lambda s: "d" in s) == ["d"]


def test_session_round_trips_through_json():
    s = session([crash_base(), run("r1", "warmup", "warmup N->1", per_call_us=US)])
    bisector.analyze(s, removers=[], fails=None)
    back = Session.from_dict(__import__("json").loads(s.to_json()))
    assert back.to_dict() == s.to_dict()


def test_a_run_that_skipped_later_stages_is_not_a_fix():
    partial = run("r2", "compile_mode+warmup", "all suspects removed", walls=(5, 10))   # compile, test only
    partial.switches["combination"] = True
    s = session([crash_base(), run("r1", "warmup", "warmup N->1", per_call_us=US), partial])
    bisector.analyze(s, removers=["warmup"], fails=lambda keep: bool(keep))
    assert s.fix["run"] == "r1"
    assert [c["run"] for c in s.fix["costs"]] == ["r1"]
