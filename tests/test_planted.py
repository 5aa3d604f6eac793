"""End to end on planted-cause fixtures (CPU): `diagnose run` must name the planted cause first, verify a
fix that removes it, and claim nothing for the harmless twin. Sleeps stand in for cost where the point is
the toggle; the compile probes use real torch.compile (backend="eager" where the compiler's cost is not
the point, real Inductor once)."""
import json

import pytest

from tests.conftest import FIXTURES, cli

P = FIXTURES / "planted"


def diagnose(tmp_path, name, *args):
    out = tmp_path / name.replace(".py", "")
    res = cli("run", P / name, "--out", out, "--jobs", "2", "--sample-repeats", "2", *args)
    s = json.loads((out / "session.json").read_text())
    return res, s


def probe_runs(s, probe):
    return [r for r in s["runs"] if r["probe"] == probe]


def test_warmup_cause(tmp_path):
    res, s = diagnose(tmp_path, "warmup_cause.py", "--stages", "test", "--budget", "20",
                      "--probes", "warmup,compile_mode")
    assert res.returncode == 1 and s["verdict"]["status"] == "timeout"
    top = s["causes"][0]
    assert top["suspects"] == ["warmup"] and top["changes_outcome"]
    assert s["fix"] and ("range(1)" in s["fix"]["diff"] or "range(3)" in s["fix"]["diff"])
    assert {c["probe"] for c in s["cleared"]} >= {"compile_mode"}


def test_warmup_harmless(tmp_path):
    res, s = diagnose(tmp_path, "warmup_harmless.py", "--stages", "test")
    assert res.returncode == 0 and s["causes"] == []
    assert {r["outcome"] for r in probe_runs(s, "warmup")} == {"ok"}


def test_import_init_cause_is_fixed_by_deferring(tmp_path):
    res, s = diagnose(tmp_path, "import_cause.py", "--stages", "compile,test", "--budget", "40",
                      "--compile-budget", "8", "--probes", "import_init")
    assert s["verdict"]["status"] == "timeout" and s["verdict"]["stage"] == "compile"
    assert s["verdict"]["phase"] == "submission_import"
    assert s["causes"][0]["suspects"] == ["import_init"] and s["causes"][0]["changes_outcome"]
    deferred = probe_runs(s, "import_init")[0]
    assert deferred["outcome"] == "ok"
    test_stage = next(st for st in deferred["stages"] if st["name"] == "test")
    first = next(p for p in test_stage["phases"] if p["name"].startswith("first_call:"))
    assert first["end_s"] - first["start_s"] > 11.5       # the work moved, it did not disappear
    assert "_diagnose_init_done" in s["fix"]["diff"]


def test_import_init_too_slow_wherever_it_runs(tmp_path):
    res, s = diagnose(tmp_path, "import_too_slow.py", "--stages", "compile,test", "--budget", "15",
                      "--probes", "import_init")
    assert s["verdict"]["status"] == "timeout"
    c = s["causes"][0]
    assert c["suspects"] == ["import_init"] and not c["changes_outcome"] and c["kind"] == "too_slow"
    assert "work itself is too slow" in c["narrative"] and s["fix"] is None


def test_import_init_harmless(tmp_path):
    res, s = diagnose(tmp_path, "import_harmless.py", "--stages", "compile,test", "--probes", "import_init")
    assert res.returncode == 0 and s["causes"] == []


def test_fullgraph_cause(tmp_path):
    res, s = diagnose(tmp_path, "fullgraph_cause.py", "--stages", "test")
    assert s["verdict"]["status"] == "crash"
    assert "fullgraph" in s["causes"][0]["suspects"] and s["causes"][0]["changes_outcome"]
    assert probe_runs(s, "fullgraph")[0]["outcome"] == "ok"


def test_fullgraph_harmless(tmp_path):
    res, s = diagnose(tmp_path, "fullgraph_harmless.py", "--stages", "test")
    assert res.returncode == 0 and s["causes"] == []


def test_recompile_cause(tmp_path):
    res, s = diagnose(tmp_path, "recompile_cause.py", "--stages", "test")
    assert s["verdict"]["status"] == "crash"
    probe = next(p for p in s["probes"] if p["name"] == "recompile")
    assert probe["state"] == "run" and "size mismatch" in probe["why"]
    assert "recompile" in s["causes"][0]["suspects"]
    assert probe_runs(s, "recompile")[0]["outcome"] == "ok"


def test_recompile_harmless(tmp_path):
    res, s = diagnose(tmp_path, "recompile_harmless.py", "--stages", "test")
    assert res.returncode == 0 and s["causes"] == []
    assert next(p for p in s["probes"] if p["name"] == "recompile")["state"] == "run"   # it recompiled once


def test_compile_mode_harmless_and_graph_capture_not_applicable_on_cpu(tmp_path):
    res, s = diagnose(tmp_path, "compile_harmless.py", "--stages", "test")
    assert res.returncode == 0 and s["causes"] == []
    assert {r["outcome"] for r in probe_runs(s, "compile_mode")} == {"ok"}


@pytest.mark.slow
def test_compile_mode_cause_and_cache_evidence_with_real_inductor(tmp_path):
    """One real Inductor compile over a 10 s budget: only 'compile off' fixes it; mode changes don't.
    The warm-cache run then shows how much of the cost is the cold cache."""
    res, s = diagnose(tmp_path, "compile_cause.py", "--stages", "test", "--budget", "10",
                      "--probes", "compile_mode,cache")
    assert s["verdict"]["status"] == "timeout" and s["verdict"]["phase"].startswith("first_call:")
    top = s["causes"][0]
    assert top["suspects"] == ["compile_mode"] and "compile off" in top["narrative"]
    outcomes = {r["toggle"]: r["outcome"] for r in probe_runs(s, "compile_mode")}
    assert outcomes["compile off"] == "ok" and outcomes["mode=default"] == "timeout"
    assert "@torch.compile" in s["fix"]["diff"]


@pytest.mark.slow
def test_cache_probe_shows_the_cold_compile_cost(tmp_path):
    """The same submission on the baseline's compile cache: evidence of the cold cost, never a fix."""
    out = tmp_path / "o"
    res = cli("run", FIXTURES / "compiled.py", "--out", out, "--stages", "test", "--probes", "cache")
    s = json.loads((out / "session.json").read_text())
    assert res.returncode == 0 and s["causes"] == [] and s["fix"] is None
    base, warm = s["runs"][0], probe_runs(s, "cache")[0]
    assert warm["switches"] == {"warm_cache": True} and warm["variant"] is None

    def compile_s(run):
        return sum((r.get("duration_us") or 0) for st in run["stages"] for r in st["compile"]) / 1e6
    assert compile_s(base) > 2.0
    assert compile_s(warm) < 0.5 * compile_s(base), (compile_s(base), compile_s(warm))


def test_fix_is_written_with_fix_and_warmup_cost_per_iteration_is_measured(tmp_path):
    fix = tmp_path / "fixed.py"
    out = tmp_path / "o"
    res = cli("run", P / "warmup_cause.py", "--out", out, "--stages", "test", "--budget", "20", "--probes", "warmup",
              "--fix", fix, "--sample-repeats", "2")
    assert res.returncode == 1
    s = json.loads((out / "session.json").read_text())
    assert "range(1)" in fix.read_text() and "range(40)" not in fix.read_text()
    compile(fix.read_text(), str(fix), "exec")
    md = (out / "report.md").read_text()
    per = float(md.split("Warmup costs about ")[1].split(" s per iteration")[0])
    assert 0.23 < per < 0.4      # the planted cost is 0.25 s of sleep per iteration (plus the eager call)
