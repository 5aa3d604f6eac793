"""`check` and `run` stopped by SIGINT or SIGTERM halfway, as a user's Ctrl-C or CI's cancel stops them: real
processes, real signals. What did not finish is never judged: the command says INTERRUPTED, names the stages
that finished and those that never did, exits 128 + the signal, and keeps the partial session."""
import json
import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from tests.conftest import FIXTURES, ROOT

pytestmark = pytest.mark.e2e     # every test here starts real processes

HERE = FIXTURES / "interrupt"
# the benchmark stage's first phase line (-v): the stage has begun, and its only case sleeps for an hour
BENCHMARK_BEGUN = re.compile(r"^r\d+ benchmark · ")
JUDGED = ("SAFE", "PASSED", "wide margin", "every stage passed", "OK ")


def _stopped_halfway(tmp_path, cmd: str, sig: int) -> tuple[int, str, str, dict]:
    """Start `diagnose CMD` on the slow benchmark, send `sig` once its benchmark stage has begun, and return
    its exit code, stdout, stderr and session."""
    out = tmp_path / "o"
    args = [sys.executable, "-m", "diagnose", cmd, str(HERE / "slow_benchmark.py"), "--problem", str(HERE / "problem"),
            "-v", "-o", str(out)] + (["--probes", "none"] if cmd == "run" else [])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "1"}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    err, begun = [], threading.Event()

    def read():
        for line in proc.stderr:
            err.append(line)
            if BENCHMARK_BEGUN.match(line):
                begun.set()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # the test stage on a busy 2-core machine takes seconds; its budget (120 s) is far above that
        assert begun.wait(300), "".join(err)
        proc.send_signal(sig)
        stdout = proc.stdout.read()
        rc = proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    reader.join(10)
    return rc, stdout, "".join(err), json.loads((out / "session.json").read_text())


@pytest.mark.parametrize("cmd", ["check", "run"])
@pytest.mark.parametrize("sig,code,name", [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")])
def test_stopped_during_the_benchmark_stage_is_interrupted_never_a_pass(tmp_path, cmd, sig, code, name):
    rc, stdout, stderr, s = _stopped_halfway(tmp_path, cmd, sig)
    assert rc == code, stdout + stderr
    assert "INTERRUPTED" in stdout, stdout
    said = stdout.replace("INTERRUPTED", "")
    assert not [w for w in JUDGED if w in said], stdout
    # the stages that finished, and those that never did, by name
    assert "finished: test ok" in stdout and "never finished: benchmark (stopped), leaderboard" in stdout, stdout
    assert f"by {name}" in stdout, stdout
    # the partial session: the stage that finished, the one stopped, a verdict that claims no pass
    assert s["verdict"]["status"] == "interrupted" and s["complete"] is False, s["verdict"]
    base = next(r for r in s["runs"] if r["role"] == "baseline")
    assert [(st["name"], st["status"]) for st in base["stages"]][:2] == [("test", "ok"), ("benchmark", "interrupted")]
    report = (tmp_path / "o" / "report.md").read_text()
    assert "INTERRUPTED" in report and "Incomplete diagnosis" in report
    if cmd == "check":
        assert stdout.splitlines()[-1].startswith("INTERRUPTED (by "), stdout
