"""Hostile and broken submissions, end to end through `diagnose run` and `diagnose check` (CPU).

For each: the verdict and message the user sees, a report on disk, no process of ours alive afterwards
(the autouse fixture, plus pid files for detached forks), and no temporary directory left behind.
"""
import glob
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from diagnose.output import write_atomic
from tests.conftest import FIXTURES, ROOT, cli

H = FIXTURES / "hostile"

CASES = [
    # fixture, status, stage, message fragment, line marker in the source (or None)
    ("exit0_at_import.py", "crash", "test", "SystemExit: 0", None),
    ("raise_systemexit.py", "crash", "test", "SystemExit", None),
    ("os_exit_at_import.py", "crash", "compile", "exit code 3", None),
    ("loop_at_import.py", "timeout", "compile", "budget", "IMPORT-LOOP"),
    ("segfault_at_import.py", "crash", "compile", "signal SIGSEGV", "SEGV-LINE"),
    ("sigkill_self.py", "crash", "compile", "signal SIGKILL", None),
    ("sleep_in_c.py", "timeout", "test", "budget", "SLEEP-LINE"),
    ("deadlock.py", "timeout", "test", "budget", "DEADLOCK-LINE"),
    ("returns_none.py", "wrong", "test", "expected a torch.Tensor, got NoneType", None),
    ("wrong_shape.py", "wrong", "test", "shape", None),
    ("wrong_dtype.py", "wrong", "test", "dtype torch.float32", None),
    ("nans.py", "wrong", "test", "NaN", None),
    # the work finishes, but `python3` never exits: the harness times out, and so do we, in interpreter_exit
    ("thread_forever.py", "timeout", "compile", "did not exit", "THREAD-LINE"),
    ("atexit_forever.py", "timeout", "compile", "did not exit", "ATEXIT-LINE"),
]


def temp_dirs():
    """diagnose's temporary directories in this test's own TMPDIR (conftest gives each test one)."""
    return set(glob.glob(os.path.join(os.environ["TMPDIR"], "diagnose-*")))


def marker_line(name, marker):
    return next(i for i, l in enumerate((H / name).read_text().splitlines(), 1) if marker in l)


@pytest.fixture
def no_temp_left():
    before = temp_dirs()
    yield
    assert temp_dirs() - before == set()


@pytest.mark.parametrize("name,status,stage,fragment,marker", CASES)
def test_run_and_check(tmp_path, no_temp_left, name, status, stage, fragment, marker):
    sub = H / name
    digest = hashlib.sha256(sub.read_bytes()).hexdigest()
    res = cli("run", sub, "--probes", "none", "--stages", "compile,test", "--budget", "5", "--out", tmp_path / "run")
    assert res.returncode == (0 if status == "ok" else 1), res.stderr
    assert "Traceback" not in res.stderr
    s = json.loads((tmp_path / "run" / "session.json").read_text())
    v = s["verdict"]
    assert (v["status"], v["stage"]) == (status, stage), v
    assert fragment in v["message"], v["message"]
    if fragment == "did not exit":
        assert v["phase"] == "interpreter_exit"
    if marker:
        assert v["site"] and v["site"]["line"] == marker_line(name, marker), v
    assert (tmp_path / "run" / "report.md").read_text().startswith("# diagnose")
    res = cli("check", sub, "--budget", "10", "--out", tmp_path / "check")
    assert res.returncode == (0 if status == "ok" else 1), res.stdout + res.stderr
    assert json.loads((tmp_path / "check" / "session.json").read_text())["verdict"]["status"] == status
    assert hashlib.sha256(sub.read_bytes()).hexdigest() == digest


def test_100mb_of_output_keeps_capped_tails(tmp_path, no_temp_left):
    res = cli("run", H / "spew.py", "--probes", "none", "--stages", "compile", "--out", tmp_path)
    assert res.returncode == 0, res.stderr
    st = json.loads((tmp_path / "session.json").read_text())["runs"][0]["stages"][0]
    assert st["stdout_bytes"] >= 100 << 20 and st["stderr_bytes"] >= 100 << 20
    assert len(st["stdout_tail"]) <= 32 << 10 and len(st["stderr_tail"]) <= 32 << 10
    assert st["stdout_tail"].rstrip().endswith("LAST-LINE")
    assert (tmp_path / "session.json").stat().st_size < 2 << 20


def test_memory_hog_is_killed_by_max_rss(tmp_path, no_temp_left):
    res = cli("run", H / "memory_hog.py", "--probes", "none", "--stages", "compile", "--max-rss", "1200",
              "--out", tmp_path)
    assert res.returncode == 1
    v = json.loads((tmp_path / "session.json").read_text())["verdict"]
    assert v["status"] == "crash" and "--max-rss" in v["message"]


def test_detached_fork_that_ignores_sigterm_is_still_killed(tmp_path, no_temp_left):
    pidfile = tmp_path / "pids"
    res = cli("run", H / "fork_detach.py", "--probes", "none", "--stages", "compile,test", "--out", tmp_path / "o",
              env={"PIDFILE": str(pidfile)})
    pids = [int(x) for x in pidfile.read_text().split()]
    assert pids, res.stderr
    time.sleep(0.5)
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert alive == []


def test_vandal_touches_only_its_own_copy(tmp_path, no_temp_left):
    sub = tmp_path / "vandal.py"
    sub.write_bytes((H / "vandal.py").read_bytes())
    keep = tmp_path / "keep.txt"
    keep.write_text("mine")
    res = cli("run", sub, "--probes", "none", "--stages", "compile,test", "--out", tmp_path / "o", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert sub.read_bytes() == (H / "vandal.py").read_bytes() and keep.read_text() == "mine"
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["report.md", "session.json", "trace.json"]


def test_keep_leaves_the_run_directory(tmp_path):
    before = temp_dirs()
    res = cli("run", FIXTURES / "healthy.py", "--probes", "none", "--stages", "test", "--keep", "--out", tmp_path)
    new = temp_dirs() - before
    try:
        assert res.returncode == 0 and len(new) == 1
        assert os.path.exists(next(iter(new)) + "/r0/test/submission.py")
    finally:
        import shutil
        for d in new:
            shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_writes_a_partial_report_and_kills_the_tree(tmp_path, sig, code):
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "diagnose", "run", str(FIXTURES / "corpus" / "wu_literal_compiled.py"),
                          "--stages", "test", "--jobs", "2", "--out", str(out)], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline:   # wait until a probe is running
        if (out / "session.json").exists() and json.loads((out / "session.json").read_text())["probes"]:
            break
        time.sleep(0.2)
    time.sleep(1.0)
    kids = psutil.Process(p.pid).children(recursive=True)
    assert kids, "no child was running"
    t0 = time.time()
    p.send_signal(sig)
    rc = p.wait(timeout=30)
    assert rc == code
    assert time.time() - t0 < 5
    s = json.loads((out / "session.json").read_text())
    assert s["complete"] is False
    assert "Incomplete diagnosis" in (out / "report.md").read_text()
    # no cause rests on a run that the interrupt cut short
    cut = {r["id"] for r in s["runs"] if r["outcome"] in ("interrupted", "incomplete") or not r["stages"]}
    assert not any(set(c["evidence"]) & cut for c in s["causes"])
    if not s["runs"][0]["stages"] or s["runs"][0]["outcome"] == "interrupted":
        assert s["verdict"]["status"] == "interrupted" and s["causes"] == []
    time.sleep(0.3)
    assert not [k for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]


def test_two_runs_at_once_do_not_collide(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "diagnose", "run", str(FIXTURES / "healthy.py"), "--probes", "none",
           "--stages", "compile,test"]
    ps = [subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
          for _ in range(2)]
    assert [p.wait(timeout=120) for p in ps] == [0, 0]
    outs = sorted((tmp_path / "reports").iterdir())
    assert len(outs) == 2
    for d in outs:
        s = json.loads((d / "session.json").read_text())
        assert s["complete"] and s["verdict"]["status"] == "ok"


def test_atomic_writer_never_leaves_a_truncated_file(tmp_path):
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    f = tmp_path / "session.json"
    write_atomic(f, '{"complete": true}')
    with pytest.raises(TypeError):
        write_atomic(f, object())  # fails inside the write
    assert f.read_text() == '{"complete": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["session.json"]
