"""A run is what the harness runs: a fresh container per run, the compile step before every stage (its
ending ignored), `ranking_by`, and nothing from this machine going in or out. Real subprocesses, real
load_inline builds, a real user HOME standing in for this machine's."""
import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from diagnose.session import StageResult
from diagnose.tasks.loader import load_task, stage_cases
from probes.extension_build.facts import step_builds
from tests.conftest import FIXTURES, cli

S = FIXTURES / "state"
P = FIXTURES / "problems"


def diagnose(tmp_path, name, sub, *args, home=None):
    out = tmp_path / name
    env = {"HOME": str(home)} if home else None
    res = cli("run", sub, "--out", out, *args, env=env)
    s = json.loads((out / "session.json").read_text()) if (out / "session.json").exists() else None
    assert s is not None, res.stdout + res.stderr
    return res, s, (out / "report.md").read_text()


def base(s):
    return next(r for r in s["runs"] if r["role"] == "baseline")


def phase_s(step, name):
    return sum(p["end_s"] - p["start_s"] for p in step["phases"] if p["name"] == name)


def tree(d: Path) -> dict:
    """Every file under d with its checksum: what 'untouched' is checked against."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file()}


@pytest.fixture
def user_home(tmp_path):
    """A user's HOME with a torch extension build and other caches already in it, as on a developer's machine."""
    home = tmp_path / "userhome"
    ext = home / ".cache" / "torch_extensions" / "py311_cpu" / "someone_elses_ext"
    ext.mkdir(parents=True)
    (ext / "someone_elses_ext.so").write_bytes(b"\x7fELF not really")
    (ext / "build.ninja").write_text("rule cxx\n")
    (home / ".triton" / "cache").mkdir(parents=True)
    (home / ".triton" / "cache" / "kernel.json").write_text("{}")
    return home


@pytest.mark.e2e
@pytest.mark.slow
def test_an_extension_build_is_each_runs_own_and_the_users_cache_is_untouched(tmp_path, user_home):
    """Diagnosed twice in a row, a load_inline build at import costs the same both times (each run's container
    starts empty, as the harness's does), is made by the compile step and read by the stage, and the user's
    own ~/.cache/torch_extensions is the same file for file, with no lock left in it."""
    before = tree(user_home)
    builds = []
    for name in ("first", "second"):
        # the compile step's limit raised from 120 s: beside two other C++ builds on 2 cores one took 111.8 s
        res, s, md = diagnose(tmp_path, name, S / "inline_ext.py", "--stages", "compile,test", "--probes",
                              "extension_build", "--compile-budget", "400", home=user_home)
        assert res.returncode == 0, res.stdout + res.stderr
        test = base(s)["stages"][0]
        step = test["compile_step"]
        assert step["status"] == "ok"
        builds.append(phase_s(step, "script"))
        # the stage's own import found the extension the compile step built: no second build
        assert phase_s(test, "submission_import") < builds[-1] / 2
        # the build directory where torch's own default puts it: under the container's ~/.cache
        row = next(line for line in md.splitlines()
                   if re.search(r"`~/\.cache/torch_extensions/py3\d+\w*_cpu/diagnose_test_silu_mul/` \|", line))
        assert "test: compile step | test stage |" in row
        assert any("ninja" in a for a in step["state"]["spawned"])
        # the build's own record: made in the compile step, within its limit, so not the cause
        (built,) = step_builds(StageResult.from_dict(step))      # the probe's own facts (its hook's events)
        assert built["ok"] and [o["output"] for o in built["built"]][-1].endswith(".so")
        probe = next(p for p in s["probes"] if p["name"] == "extension_build")
        assert probe["state"] == "not applicable" and "not the cause" in probe["why"], probe
        assert "## Extension builds" in md
    assert min(builds) > 3.0, builds                     # a real build, both times
    assert max(builds) / min(builds) < 2.0, builds       # the same cold build, not a warm one the second time
    assert tree(user_home) == before
    assert not list(user_home.rglob("lock"))


@pytest.mark.e2e
@pytest.mark.slow
def test_a_killed_build_leaves_its_lock_and_the_stage_waits_on_it(tmp_path):
    """The harness kills its compile step at its limit, mid-build; torch's build lock stays in the container
    and the stage, in the same container, waits on it until its own deadline. The report says so. The step's
    12 s leave room for torch's import (up to 6 s seen on a loaded 2-core machine) before the build starts;
    the build itself takes over a minute."""
    res, s, md = diagnose(tmp_path, "o", S / "inline_ext.py", "--stages", "compile,test", "--probes", "none",
                          "--compile-budget", "12", "--budget", "15")
    assert res.returncode == 1, res.stdout + res.stderr
    test = base(s)["stages"][0]
    assert test["compile_step"]["status"] == "timeout" and test["status"] == "timeout"
    assert "file_baton" in test["stacks"]
    top = s["causes"][0]
    assert top["kind"] == "stale_lock" and top["suspects"] == ["extension_build"], top
    assert "killed the compile step before the test stage at its 12 s limit" in top["narrative"], top
    assert "`lock` file stayed in the container" in top["narrative"] and "FileBaton.wait" in md


@pytest.mark.e2e
def test_a_plan_cache_on_this_machine_never_reaches_a_run_nor_credits_a_fix(tmp_path):
    """Every plan is already in the user's ~/.cache. A fresh container has none: the baseline times out, and
    so does the variant without compile, which is not credited with a fix."""
    home = tmp_path / "userhome"
    plans = home / ".cache" / "diagnose_test_plans"
    plans.mkdir(parents=True)
    for shape in ("64x256x128x256", "128x128x64x128", "32x64x96x64"):
        (plans / f"{shape}.json").write_text('{"tile": 1}')
    res, s, md = diagnose(tmp_path, "o", S / "plan_cache.py", "--stages", "test", "--budget", "10",
                          "--probes", "compile_mode", home=home)
    assert s["verdict"]["status"] == "timeout", s["verdict"]
    off = [r for r in s["runs"] if r["probe"] == "compile_mode" and r["role"] == "single"]
    assert off and all(r["outcome"] == "timeout" for r in off), [(r["toggle"], r["outcome"]) for r in off]
    assert not any("compile_mode" in c["suspects"] and c["changes_outcome"] for c in s["causes"])
    assert sorted(p.name for p in plans.iterdir()) == ["128x128x64x128.json", "32x64x96x64.json",
                                                       "64x256x128x256.json"]
    # the plans the stage wrote are the run's own state, shown as such
    assert "~/.cache/diagnose_test_plans" in md


@pytest.mark.e2e
def test_a_warm_home_never_reaches_a_run(tmp_path):
    """A table built at import and kept under ~/.cache: the user's HOME holds it, but no run sees it. With the
    compile step, the table is built in the run's container before the stage, which reads it (OK); without
    the compile step the stage builds it itself and runs out of time, the warm HOME notwithstanding (a HOME
    that leaked in would have let it read the table and pass)."""
    warm = tmp_path / "warmhome"
    (warm / ".cache" / "diagnose_test_table").mkdir(parents=True)
    (warm / ".cache" / "diagnose_test_table" / "table.json").write_text('{"entries": 1}')
    verdicts = {}
    for name, stages in (("step", "compile,test"), ("nostep", "test")):
        res, s, md = diagnose(tmp_path, name, S / "table_at_import.py", "--stages", stages, "--budget", "8",
                              "--probes", "none", home=warm)
        verdicts[name] = s["verdict"]["status"]
        test = base(s)["stages"][0]
        if stages == "compile,test":
            assert phase_s(test["compile_step"], "script") > 8.0       # built in the container, not read from HOME
            row = next(line for line in md.splitlines() if "`~/.cache/diagnose_test_table/table.json` |" in line)
            assert "test: compile step | test stage |" in row
    assert verdicts == {"step": "ok", "nostep": "timeout"}, verdicts
    assert (warm / ".cache" / "diagnose_test_table" / "table.json").read_text() == '{"entries": 1}'


@pytest.mark.e2e
def test_a_compile_step_that_times_out_decides_nothing(tmp_path):
    """A slow `if __name__ == "__main__":` self-test: only the compile step runs it. It times out there; the
    test stage runs after it and alone gives the verdict. The step's 12 s leave room for torch's import, which
    took 4 s on a loaded 2-core machine, before the minute's wait."""
    res, s, md = diagnose(tmp_path, "o", S / "main_selftest_slow.py", "--stages", "compile,test",
                          "--compile-budget", "12", "--probes", "none")
    assert res.returncode == 0, res.stdout + res.stderr
    assert s["verdict"]["status"] == "ok"
    step = base(s)["stages"][0]["compile_step"]
    assert step["status"] == "timeout" and step["phase"] == "script"
    assert step["site"]["line"] == 18          # the self-test's loop, from the stacks at the deadline
    assert "The harness ignores how this step ends" in md and "TIMEOUT" in md


@pytest.mark.e2e
def test_a_main_block_that_needs_cuda_changes_only_the_compile_steps_line(tmp_path):
    out = tmp_path / "o"
    res = cli("check", S / "main_selftest_cuda.py", "--out", out)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "PASSED ON CPU" in res.stdout and "CANNOT JUDGE" not in res.stdout
    s = json.loads((out / "session.json").read_text())
    steps = [st["compile_step"] for st in base(s)["stages"]]
    assert steps and all(c["status"] in ("crash", "needs_gpu") for c in steps)
    assert all(st["status"] == "ok" for st in base(s)["stages"])
    assert "compile step" in res.stdout


def _listing(d: str, prefixes) -> set[str]:
    try:
        return {n for n in os.listdir(d) if n.startswith(prefixes)}
    except OSError:
        return set()


@pytest.mark.e2e
def test_nothing_outlives_a_run_in_shm_or_tmp(tmp_path):
    """A pool and a lock at import put semaphores in /dev/shm; a write by absolute path goes to /tmp. With
    a private /tmp and /dev/shm (a mount namespace), both land in the run's own container and go with it."""
    shm0 = _listing("/dev/shm", ("sem.", "mp-", "psm_"))
    tmp0 = _listing("/tmp", ("pymp-", "diagnose_test_marker"))
    for name, sub in (("pool", "pool_at_import.py"), ("marker", "writes_tmp.py")):
        res, s, md = diagnose(tmp_path, name, S / sub, "--stages", "compile,test", "--probes", "none")
        assert res.returncode == 0, res.stdout + res.stderr
        walls = s["harness"]["container"]["walls"]
        # /var/tmp and the real home may be private too (docs/how-it-works.md); /tmp and /dev/shm are what it needs
        if not {"/tmp", "/dev/shm"} <= set(walls["private"]):
            pytest.skip(f"no private /tmp and /dev/shm here: {walls.get('why')}")
        assert walls["namespace"] and walls["private"][:2] == ["/tmp", "/dev/shm"], walls
    assert _listing("/dev/shm", ("sem.", "mp-", "psm_")) == shm0
    assert _listing("/tmp", ("pymp-", "diagnose_test_marker")) == tmp0
    # the write by absolute path is recorded where it landed: the run's own /tmp, not this machine's
    step = base(s)["stages"][0]["compile_step"]["state"]
    assert "/tmp/diagnose_test_marker" in step["written"] and not step["outside"], step
    assert "`/tmp/diagnose_test_marker`" in md


@pytest.mark.e2e
def test_ranking_by_last_times_only_the_last_benchmark_case(tmp_path):
    """The task default: benchmark and leaderboard get the last benchmark case only; `geom` gets them all."""
    for folder, specs in (("ranked_last", ["size: 128; seed: 5"]),
                          ("ranked_geom", ["size: 32; seed: 3", "size: 64; seed: 4", "size: 128; seed: 5"])):
        out = tmp_path / folder
        res = cli("run", P / "subs" / "double_ok.py", "--problem", P / folder, "--probes", "none", "--stages",
                  "benchmark", "--out", out)
        assert res.returncode == 0, res.stdout + res.stderr
        s = json.loads((out / "session.json").read_text())
        rep = base(s)["stages"][0]["evaluator"]["report"]
        assert [v for k, v in rep.items() if k.startswith("benchmark.") and k.endswith(".spec")] == specs
        assert s["harness"]["ranking_by"] == folder.split("_")[1]


def test_the_builtin_task_ranks_by_the_geometric_mean_of_every_shape():
    t = load_task(None, "fp8-dual-gemm", small=True).to_dict()
    assert t["ranking_by"] == "geom" and stage_cases(t, "benchmark") == t["benchmarks"]
    assert stage_cases({**t, "ranking_by": "last"}, "leaderboard") == t["benchmarks"][-1:]
    assert stage_cases({**t, "ranking_by": "last"}, "test") == t["tests"]
