"""Shared fixtures. Every test gets its own TMPDIR (so a test only ever looks at its own temporary files,
never at other processes'), an autouse fixture fails any test that leaves a process of ours alive, and one
keeps the quick tier quick: a test not marked e2e that starts a process fails, naming what it started."""
from __future__ import annotations

import multiprocessing.util
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXAMPLES = ROOT / "examples"


# The quick tier (`-m "not e2e"`) is the one a developer runs after every edit: what makes a test slow is a real
# process (a run, the child worker, a cluster, the CLI as a user starts it), so a test outside the e2e mark may
# start none. An audit hook sees every way Python starts one, in the test's setup (module fixtures included),
# its body and its teardown; the hook cannot be removed, so it only records while a quick test is running.
SPAWNS = ("subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.system", "os.exec", "os.spawn")
NOT_QUICK = {"e2e", "gpu", "corpus"}
started: list[str] = []
_watching = [False]


def _record_spawn(event: str, args: tuple) -> None:
    if _watching[0] and event in SPAWNS:
        started.append(f"{event} {args[:2]!r}"[:300])


sys.addaudithook(_record_spawn)
_spawnv = multiprocessing.util.spawnv_passfds


def _spawnv_seen(path, args, passfds):
    """multiprocessing's spawn and forkserver start their process with no audit event: seen here instead."""
    _record_spawn("os.spawn", ("multiprocessing", args))
    return _spawnv(path, args, passfds)


multiprocessing.util.spawnv_passfds = _spawnv_seen


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    started.clear()
    _watching[0] = not ({m.name for m in item.iter_markers()} & NOT_QUICK)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    _watching[0] = False


@pytest.fixture(autouse=True)
def quick_tests_start_no_process():
    yield
    assert not (_watching[0] and started), ("a test outside the e2e mark started a process; mark it "
                                            f"@pytest.mark.e2e (tests/conftest.py): {started}")


@pytest.fixture(autouse=True)
def own_tmpdir(tmp_path, monkeypatch):
    d = tmp_path / "tmpdir"
    d.mkdir()
    monkeypatch.setenv("TMPDIR", str(d))
    monkeypatch.setattr("tempfile.tempdir", None)
    yield d


def _is_keeper(p) -> bool:
    """The runner's keeper lives as long as the process that started it (this one, for in-process
    runner tests): not a leak."""
    from diagnose.runs.runner.process_tree import KEEPER_TAG
    try:
        return KEEPER_TAG in p.cmdline()
    except psutil.Error:
        return True


@pytest.fixture(autouse=True)
def no_process_left():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    deadline = time.time() + 5
    while True:
        left = [p for p in psutil.Process().children(recursive=True)
                if p.pid not in before and p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                and not _is_keeper(p)]
        if not left or time.time() > deadline:
            break
        time.sleep(0.1)
    for p in left:
        p.kill()
    assert not left, f"processes left alive: {[(p.pid, p.cmdline()[:4]) for p in left]}"


def _audit_sessions(root: Path) -> list[str]:
    """Every claim of every session.json under root, checked against that session's own runs."""
    import json

    from diagnose.analysis.audit.audit import audit
    from diagnose.session import Session
    out = []
    for f in sorted(root.rglob("session.json")):
        try:
            s = Session.from_dict(json.loads(f.read_text()))
        except (ValueError, OSError):
            continue      # half-written or not ours: the test that wrote it says what it expects
        out += [f"{f}: {x}" for x in audit(s)]
    return out


@pytest.fixture(autouse=True)
def audited(tmp_path):
    """No test may produce a session with a claim its runs cannot bear (diagnose report --audit)."""
    yield
    bad = _audit_sessions(tmp_path)
    assert not bad, "unsupported claims:\n" + "\n".join(bad)


@pytest.fixture(scope="session", autouse=True)
def audited_everywhere(tmp_path_factory):
    """The same over every directory any test made, module-scoped ones included (the hostile suite's)."""
    yield
    bad = _audit_sessions(tmp_path_factory.getbasetemp())
    assert not bad, "unsupported claims:\n" + "\n".join(bad)


def cli(*args, timeout=600, env=None, cwd=None) -> subprocess.CompletedProcess:
    """Run `python -m diagnose ARGS` as a user would."""
    e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "diagnose", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=e, cwd=cwd or ROOT)


def diagnose_each(root: Path, files: dict[str, Path], *args, workers: int = 3) -> dict[str, tuple]:
    """`diagnose run FILE ARGS --out root/NAME` for every file, `workers` at a time: name -> (result, out). For a
    module fixture of diagnoses that mostly wait (a planted search's builds are sleeps: about 8 s of CPU in a 39 s
    diagnosis): a few at once take far less wall than one after another. Keep it a few: four beside the other
    worker's four left every run waiting for a CPU (docs/testing.md)."""
    def one(name):
        out = root / name
        return name, (cli("run", files[name], *args, "--out", out), out)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(pool.map(one, files))


def has_cuda() -> bool:
    from diagnose.runs.device import has_gpu
    return has_gpu()


def cpu_slowdown(cpu_seconds: float = 0.3) -> float:
    """How much slower than an idle core this machine runs CPU work now: the wall time of a busy loop over its own
    CPU time (1.0 alone on a core; 2.0 where another process shares it). A test whose budget is a wall-clock margin
    scales it by this, so that a busy machine moves the margin, not the verdict."""
    w0, c0 = time.perf_counter(), time.process_time()
    while time.process_time() - c0 < cpu_seconds:
        pass
    return max(1.0, (time.perf_counter() - w0) / (time.process_time() - c0))
