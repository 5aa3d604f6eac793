"""End-to-end details of a diagnosis beyond its verdict: the fix written with --fix, and the cache probe's
evidence. Real runs with real torch.compile; part of the corpus step."""
import json

import pytest

from tests.conftest import FIXTURES, cli

pytestmark = [pytest.mark.corpus, pytest.mark.e2e]


def test_the_fix_is_written_with_fix(tmp_path):
    fix, out = tmp_path / "fixed.py", tmp_path / "o"
    res = cli("run", FIXTURES / "corpus" / "wu_literal_compiled.py", "--out", out, "--stages", "test", "--budget", "20",
              "--probes", "warmup", "--fix", fix, "--sample-repeats", "2")
    assert res.returncode == 1
    assert "range(1)" in fix.read_text() and "range(40)" not in fix.read_text()
    compile(fix.read_text(), str(fix), "exec")


def test_cache_probe_shows_the_cold_compile_cost(tmp_path):
    """The same submission on the baseline's compile cache: evidence of the cold cost, never a fix."""
    out = tmp_path / "o"
    res = cli("run", FIXTURES / "compiled.py", "--out", out, "--stages", "test", "--probes", "cache")
    s = json.loads((out / "session.json").read_text())
    assert res.returncode == 0 and s["causes"] == [] and s["fix"] is None
    base, warm = s["runs"][0], next(r for r in s["runs"] if r["probe"] == "cache")
    assert warm["switches"] == {"warm_cache": True} and warm["variant"] is None

    def compile_s(run):
        return sum((r.get("duration_us") or 0) for st in run["stages"] for r in st["compile"]) / 1e6
    assert compile_s(base) > 2.0
    assert compile_s(warm) < 0.5 * compile_s(base), (compile_s(base), compile_s(warm))
