"""The CLI end to end with the scripted runner (hidden `--runner scripted:FILE`): the engine's scheduling,
evidence rules and outputs exactly, with no process started and no torch imported."""
import json
from dataclasses import asdict

import pytest

from tests.builders import stage
from tests.conftest import FIXTURES, cli
from tests.test_engine import STORM

pytestmark = pytest.mark.e2e     # every test here starts real processes

US = {"256x4096x7168": 43.0}
RECOMPILES = [{"compile_id": "0/0", "phase": "first_call:a"},
              {"compile_id": "0/1", "phase": "first_call:b", "recompile_reason": "size mismatch at index 0"}]


def _d(st) -> dict:
    return json.loads(json.dumps(asdict(st), default=str))


def _storm_script(path, delay_s=0.05, slow_fix_s=None):
    """The baseline times out in benchmark (a recompile per shape); compile off and dynamic=True pass."""
    fail = [stage("test", wall=10, budget=180, compile=RECOMPILES),
            stage("benchmark", "timeout", wall=180, budget=180, phase="check:256x4096x7168", compile=RECOMPILES,
                  message="the stage ran past its 180 s budget")]
    good = [stage("test", wall=10, budget=180), stage("benchmark", wall=20, budget=180, per_call_us=US),
            stage("leaderboard", wall=20, budget=180, per_call_us=US)]
    runs = [{"match": {"toggle": "compile off"}, "stages": [_d(s) for s in good]},
            {"match": {"toggle": "dynamic=True"}, "stages": [_d(s) for s in good]}]
    path.write_text(json.dumps({"delay_s": delay_s, "runs": runs,
                                "default": [_d(s) for s in fail] + [{"name": "leaderboard", "status": "skipped"}]}))
    return path


def test_the_verdict_comes_first_and_the_report_says_when(tmp_path, audited):
    sub = tmp_path / "storm.py"
    sub.write_text(STORM)
    script = _storm_script(tmp_path / "script.json")
    res = cli("run", sub, "--runner", f"scripted:{script}", "-o", tmp_path / "out", env={"CI": "1"}, timeout=120)
    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stderr.splitlines()
    said = next(i for i, line in enumerate(lines) if line.startswith("verdict at "))
    assert "TIMEOUT the stage ran past its 180 s budget; the causes follow" in lines[said]
    # the verdict right after the baseline's last stage, before any toggle's outcome
    assert lines[said - 1].startswith("r0 done: timeout"), res.stderr
    causes = next(i for i, line in enumerate(lines) if line.startswith("causes at "))
    assert causes > said and "top cause recompile; confirmations and fix costs follow" in lines[causes]
    # the runs that only cost the fixes end after it
    assert any(line.startswith("r") and " done: ok" in line for line in lines[causes + 1:]), res.stderr
    assert "fix: dynamic=True" in res.stdout
    session = json.loads((tmp_path / "out" / "session.json").read_text())
    assert 0 < session["verdict_at_s"] < session["cause_at_s"] <= session["diagnosis_s"]
    assert "· verdict at " in (tmp_path / "out" / "report.md").read_text()


def test_a_runner_that_is_not_a_script_is_one_error_line(tmp_path):
    sub = tmp_path / "storm.py"
    sub.write_text(STORM)
    for spec, words in (("local", "--runner must be scripted:FILE"),
                        (f"scripted:{tmp_path / 'none.json'}", "not a runner script")):
        res = cli("run", sub, "--runner", spec, "-o", tmp_path / "o", timeout=60)
        assert res.returncode == 2 and words in res.stderr and "Traceback" not in res.stderr, res.stderr


def _stuck_at_import(tmp_path, sub, probe, unreached):
    """Every run times out in its import, as these fixtures do: before any compile, and (unreached) before
    the watched lines; a decorator line runs at import, a loop in custom_kernel does not."""
    hung = stage("test", "timeout", wall=8, budget=8, message="the stage ran past its 8 s budget")
    hung.phase, hung.phases = "submission_import", hung.phases[:2]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"default": [{**_d(hung), "unreached": unreached}]}))
    out = tmp_path / "o"
    res = cli("run", sub, "--stages", "test", "--budget", "8", "--probes", probe, "--runner", f"scripted:{script}",
              "--out", out, timeout=120)
    return res, json.loads((out / "session.json").read_text())


def test_a_toggle_the_run_never_reached_is_inconclusive_not_cleared(tmp_path):
    res, s = _stuck_at_import(tmp_path, FIXTURES / "import_blocks_warmup.py", "warmup", True)
    assert res.returncode == 1 and s["verdict"]["status"] == "timeout", res.stdout + res.stderr
    assert s["verdict"]["phase"] == "submission_import"
    assert s["cleared"] == [] and not any("warmup" in c["suspects"] for c in s["causes"])
    (inc,) = s["inconclusive"]
    assert inc["probe"] == "warmup" and "never executed" in inc["reason"]
    variants = [r for r in s["runs"] if r["probe"] == "warmup"]
    assert variants and all(r["watched"] and not any(st["reached"] for st in r["stages"]) for r in variants)


def test_a_compile_that_never_happened_is_not_cleared(tmp_path):
    """The import times out before anything is compiled: compile off changes nothing, and that says nothing
    about compiling. Not 'verified not the cause': inconclusive, with the reason."""
    res, s = _stuck_at_import(tmp_path, FIXTURES / "lib" / "compile_never_ran.py", "compile_mode", False)
    assert res.returncode == 1 and s["verdict"]["status"] == "timeout", res.stdout + res.stderr
    assert [r for r in s["runs"] if r["probe"] == "compile_mode"]
    assert not any(c["probe"] == "compile_mode" for c in s["cleared"]), s["cleared"]
    inc = next(i for i in s["inconclusive"] if i["probe"] == "compile_mode")
    assert "nothing to remove" in inc["reason"], inc


def test_runs_that_all_time_out_name_no_interaction_and_no_fix(tmp_path):
    """The issue's case: compiled at import, 45 s of sleep at import, a warmup per shape. Every run times out,
    the import deferral only later; the bisector must not turn that into 'A x B, removing either fixes it'."""
    hung = stage("test", "timeout", wall=15, budget=15, message="exceeded the 15 s budget in submission_import")
    hung.phase, hung.phases = "submission_import", hung.phases[:2]
    later = stage("test", "timeout", wall=15, budget=15, message="exceeded the 15 s budget in first_call")
    later.phase = "first_call:256x512x256"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"runs": [{"match": {"toggle": "defer import work"}, "stages": [_d(later)]},
                                           {"match": {"toggle": "all suspects removed"}, "stages": [_d(later)]}],
                                  "default": [_d(hung)]}))
    out = tmp_path / "o"
    res = cli("run", FIXTURES / "trust" / "slow_everywhere.py", "--stages", "test", "--budget", "15",
              "--runner", f"scripted:{script}", "--out", out, timeout=120)
    s = json.loads((out / "session.json").read_text())
    assert res.returncode == 1 and s["verdict"]["status"] == "timeout", res.stdout + res.stderr
    assert s["fix"] is None and all(c["kind"] == "too_slow" and not c["changes_outcome"] for c in s["causes"])
    assert "fixes it" not in res.stdout and " × " not in res.stdout, res.stdout
    assert s["causes"] and "too slow" in s["causes"][0]["narrative"]
    audit = cli("report", out / "session.json", "--audit")
    assert audit.returncode == 0 and "UNSUPPORTED" not in audit.stdout, audit.stdout
