"""A run is the harness's run, down to argv, environment, exit and what lies outside the container (CPU).

Each fixture under tests/fixtures/fidelity reaches for something a harness container does not have, or exits
differently from how the harness lets it, and gets the harness's answer. All cases run at once, four at a
time, in the module's setup; each test then reads its case.
"""
import json
import os
import shutil
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, cli

pytestmark = pytest.mark.e2e     # every test here starts real processes

F = FIXTURES / "fidelity"
BUDGET = ["--budget", "15", "--compile-budget", "15", "--probes", "none", "--stages", "compile,test"]
HOME_CACHE = Path(os.path.expanduser("~")) / ".diagnose-test-tune-cache.json"
VARTMP_CACHE = Path("/var/tmp/diagnose-test-tune-cache.json")
INDUCTOR_CACHE = Path("/var/tmp/diagnose-test-inductor-cache")
PREFIX_FILE = Path(sys.prefix) / "diagnose-test-written.txt"
USER_ENV = {"NVCC_APPEND_FLAGS": "-G", "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "CXX": "clang++",
            "NUMBA_CACHE_DIR": "/var/tmp/numba"}


def _line(name: str, marker: str) -> int:
    return next(i for i, t in enumerate((F / name).read_text().splitlines(), 1) if marker in t)


def _session(out: Path) -> dict:
    return json.loads((out / "session.json").read_text())


def _outside_dir() -> Path:
    """A directory of this machine's that no run's container covers (/var/tmp and /tmp are private to each
    run), lent to the runs on purpose (DIAGNOSE_SHARE): what a path on the user's machine stands for."""
    return Path(tempfile.mkdtemp(prefix="diagnose-test-outside-", dir="/var/tmp" if os.path.isdir("/var/tmp")
                                 else None))


def _cases(root: Path) -> list[tuple[str, list, dict]]:
    """(case id, argv after `run`, environment) for every case."""
    shared = _outside_dir()
    (shared / "diagnose_outside_helper.py").write_text("SCALE = 1.0\n")
    abs_path = root / "abs_syspath.py"
    abs_path.write_text((F / "argv_mode.py").read_text().replace(
        "if __name__", f"sys.path.insert(0, {str(shared)!r})\nimport diagnose_outside_helper  # noqa\n"
                       "if __name__"))
    stale = Path(f"/tmp/diagnose-test-stale-{uuid.uuid4().hex}.json")
    stale.write_text('{"tile": 64}')
    tmp_read = root / "tmp_read.py"
    tmp_read.write_text((F / "argv_mode.py").read_text().replace(
        "if __name__", f"PLAN = open({str(stale)!r}).read()\nif __name__"))
    helpers = root / "helpers"
    helpers.mkdir()
    (helpers / "diagnose_test_helper.py").write_text("X = 1\n")
    out = []
    for name in ("home_cache_pwd", "vartmp_cache"):     # twice each, no compile step: nothing carries over
        out += [(f"{name}#{i}", [F / f"{name}.py", "--stages", "test"], {}) for i in (1, 2)]
    # a real compile in the stage: a budget no loaded CPU reaches; no compile step (`python3 submission.py` compiles
    # nothing here, as custom_kernel is never called, and wrote nothing: up to its 15 s limit under load, for nothing)
    out += [(f"inductor_cache_env#{i}", [F / "inductor_cache_env.py", "--budget", "120", "--stages", "test"], {})
            for i in (1, 2)]
    out += [(n, [F / f"{n}.py"], {}) for n in ("writes_prefix", "monitor_popen", "detached_build",
                                                 "main_argparse", "argv_mode")]
    out += [("needs_pythonpath", [F / "needs_pythonpath.py"], {"PYTHONPATH": str(helpers), **USER_ENV}),
            ("assert_at_import", [F / "assert_at_import.py"], {"PYTHONOPTIMIZE": "1"}),
            ("abs_syspath", [abs_path], {"DIAGNOSE_SHARE": str(shared)}),
            ("tmp_read_no_namespace", [tmp_read], {"DIAGNOSE_PRIVATE_MOUNTS": "0", "STALE": str(stale)})]
    return out


# its tests share one xdist_group: under --dist loadgroup one worker runs them all, so this is built once
@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    root = tmp_path_factory.mktemp("fidelity")
    for p in (HOME_CACHE, VARTMP_CACHE, PREFIX_FILE):
        p.unlink(missing_ok=True)
    shutil.rmtree(INDUCTOR_CACHE, ignore_errors=True)
    cases = _cases(root)
    by_id = {}

    def one(case):
        cid, args, env = case
        out = root / cid.replace("#", "-")
        tmp = root / "tmp" / out.name
        tmp.mkdir(parents=True)
        # a case's own options come after the common ones, and win
        res = cli("run", args[0], *BUDGET, *args[1:], "--out", out, env={"TMPDIR": str(tmp), **env}, timeout=300)
        return cid, (res, out)

    # the second diagnosis of a case runs after the first: it must not find what the first left
    firsts = [c for c in cases if not c[0].endswith("#2")]
    with ThreadPoolExecutor(max_workers=4) as pool:
        by_id.update(pool.map(one, firsts))
        by_id.update(pool.map(one, [c for c in cases if c[0].endswith("#2")]))
    yield by_id
    for p in (HOME_CACHE, VARTMP_CACHE, PREFIX_FILE):
        p.unlink(missing_ok=True)
    shutil.rmtree(INDUCTOR_CACHE, ignore_errors=True)
    for d in Path("/var/tmp").glob("diagnose-test-outside-*"):
        shutil.rmtree(d, ignore_errors=True)
    for f in Path("/tmp").glob("diagnose-test-stale-*.json"):
        f.unlink(missing_ok=True)


@pytest.mark.xdist_group("fidelity-outcomes")
@pytest.mark.parametrize("name,cache", [("home_cache_pwd", HOME_CACHE), ("vartmp_cache", VARTMP_CACHE)])
def test_a_cache_outside_the_container_never_carries_over(outcomes, name, cache):
    """The real home (found through pwd) and /var/tmp are the run's own: every diagnosis tunes cold, times
    out at the same line, and this machine keeps nothing (before, the second diagnosis found the first's
    cache and passed)."""
    for i in (1, 2):
        res, out = outcomes[f"{name}#{i}"]
        v = _session(out)["verdict"]
        assert res.returncode == 1 and v["status"] == "timeout", res.stdout + res.stderr
        assert v["site"]["line"] == _line(f"{name}.py", "TUNE-LINE"), v
    assert not cache.exists()


@pytest.mark.xdist_group("fidelity-outcomes")
def test_a_cache_dir_set_at_import_stays_in_the_container(outcomes):
    for i in (1, 2):
        res, out = outcomes[f"inductor_cache_env#{i}"]
        s = _session(out)
        assert res.returncode == 0, res.stdout + res.stderr
        test = s["runs"][0]["stages"][0]
        # compiled cold in both diagnoses: each wrote the cache anew, into its own container's /var/tmp
        assert "/var/tmp/diagnose-test-inductor-cache/" in test["state"]["written"], test["state"]["written"]
        assert test["state"]["outside"] == [], test["state"]["outside"]
    assert not INDUCTOR_CACHE.exists()


@pytest.mark.xdist_group("fidelity-outcomes")
def test_the_python_installation_is_lent_read_only(outcomes):
    res, out = outcomes["writes_prefix"]
    assert res.returncode == 0, res.stdout + res.stderr
    step = _session(out)["runs"][0]["stages"][0]
    assert {"op": "write", "path": str(PREFIX_FILE)} in step["state"]["outside"], step["state"]["outside"]
    assert not PREFIX_FILE.exists()


@pytest.mark.xdist_group("fidelity-outcomes")
def test_a_child_holding_stdout_keeps_the_stage_open(outcomes):
    res, out = outcomes["monitor_popen"]
    v = _session(out)["verdict"]
    assert res.returncode == 1 and (v["status"], v["phase"]) == ("timeout", "outputs_open"), v
    assert "stdout or stderr stayed open" in v["message"] and "time.sleep(1000)" in v["message"], v["message"]
    assert v["site"]["line"] == _line("monitor_popen.py", "MONITOR-LINE"), v


@pytest.mark.xdist_group("fidelity-outcomes")
@pytest.mark.parametrize("name", ["detached_build", "main_argparse", "argv_mode"])
def test_what_the_harness_passes_passes(outcomes, name):
    """A build the compile step leaves running in the container, a __main__ block with argparse (argv is
    ['submission.py']), a submission that reads the mode from sys.argv[1]."""
    res, out = outcomes[name]
    s = _session(out)
    assert res.returncode == 0 and s["verdict"]["status"] == "ok", res.stdout + res.stderr
    test = s["runs"][0]["stages"][0]
    assert test["compile_step"]["status"] == "ok", test["compile_step"]["message"]


@pytest.mark.xdist_group("fidelity-outcomes")
def test_the_users_environment_does_not_reach_the_run_and_is_named(outcomes):
    res, out = outcomes["needs_pythonpath"]
    s = _session(out)
    v = s["verdict"]
    assert res.returncode == 1 and v["status"] == "crash" and "ModuleNotFoundError" in v["message"], v
    assert v["site"]["line"] == _line("needs_pythonpath.py", "HELPER-LINE")
    env = s["harness"]["container"]["env"]
    assert env["left_out"]["PYTHONPATH"].endswith("helpers"), env
    for k, val in USER_ENV.items():
        assert env["left_out"][k] == val, (k, env)
    assert {"TMPDIR", "HOME"} <= set(env["replaced"]), env
    md = (out / "report.md").read_text()
    assert "`PYTHONPATH=" in md and "`NVCC_APPEND_FLAGS=-G`" in md and "`TMPDIR=" in md


@pytest.mark.xdist_group("fidelity-outcomes")
def test_python_options_of_the_users_shell_are_not_the_harness(outcomes):
    res, out = outcomes["assert_at_import"]
    s = _session(out)
    assert res.returncode == 1 and "AssertionError" in s["verdict"]["message"], res.stdout + res.stderr
    assert s["harness"]["container"]["env"]["left_out"]["PYTHONOPTIMIZE"] == "1"


@pytest.mark.xdist_group("fidelity-outcomes")
def test_a_path_on_this_machine_makes_a_pass_inconclusive(outcomes):
    res, out = outcomes["abs_syspath"]
    s = _session(out)
    v = s["verdict"]
    assert v["status"] == "incomplete" and res.returncode == 1, res.stdout + res.stderr
    assert v["message"].startswith("inconclusive: depends on this machine's /") and \
        "diagnose_outside_helper.py" in v["message"], v["message"]
    assert "inconclusive: depends on this machine's" in res.stdout


@pytest.mark.xdist_group("fidelity-outcomes")
def test_without_a_mount_namespace_the_first_lines_say_so_and_tmp_is_outside(outcomes):
    res, out = outcomes["tmp_read_no_namespace"]
    s = _session(out)
    first = res.stderr.splitlines()[0]
    assert first.startswith("isolation: /tmp, /dev/shm, /var/tmp are this machine's"), res.stderr
    assert s["verdict"]["status"] == "incomplete" and "diagnose-test-stale-" in s["verdict"]["message"], s["verdict"]


def test_a_folder_without_files_sends_the_harness_set_and_the_report_lists_it(tmp_path):
    """kernelbot writes the files a task names; a helper lying beside them is not among them."""
    folder = tmp_path / "named"
    shutil.copytree(FIXTURES / "problems" / "named", folder)
    (folder / "helper_not_sent.py").write_text("X = 1\n")
    sub = tmp_path / "sub.py"
    sub.write_text("import helper_not_sent  # noqa: F401\n\n\ndef custom_kernel(data):\n    return data.x + data.y\n")
    res = cli("run", sub, "--problem", folder, "--probes", "none", "--stages", "test", "--out", tmp_path / "o")
    s = _session(tmp_path / "o")
    assert s["harness"]["container"]["files"] == ["reference.py", "submission.py"], s["harness"]["container"]
    assert "No module named 'helper_not_sent'" in s["verdict"]["message"], res.stdout + res.stderr
    assert "reference.py, submission.py" in (tmp_path / "o" / "report.md").read_text()
