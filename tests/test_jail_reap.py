"""The jail's init (runs/jail.py) lives through the runner's pauses. The arbiter stops a run (SIGSTOP to each of its
processes, init included) while another run times on their GPU, then continues it. init used to wait for signals
with sigtimedwait, which CPython returns, once stopped past its timeout, with a siginfo it never filled: init died
on a signal number of -46442256 (or recorded SIGQUIT from a pid that does not exist), and every process of the run
died with it, at the end of a pause of over a second: 3 of 14 stages of a recompile storm on an H100 and an H200."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

INIT = """
import json, os, signal, sys, time
from diagnose.runs import jail
from diagnose.runs.jail_names import frames
r, w = os.pipe()
signal.pthread_sigmask(signal.SIG_BLOCK, jail.SIGNALS_SEEN + (signal.SIGCHLD,))
step = os.fork()
if step == 0:
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    time.sleep(float(sys.argv[1]))
    os._exit(7)
print("ready", flush=True)
rc = jail._reap(w, step)
os.close(w)
data = b""
while chunk := os.read(r, 1 << 16):
    data += chunk
print(json.dumps({"rc": rc, "said": frames(data)[0]}), flush=True)
"""


@pytest.mark.e2e
def test_init_stopped_past_a_second_and_continued_lives_and_says_the_steps_exit():
    p = subprocess.Popen([sys.executable, "-c", INIT, "9"], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout.readline().strip() == "ready"
    for _ in range(5):              # five pauses, each longer than the old wait's 1 s timeout
        time.sleep(0.3)
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(1.3)
        os.kill(p.pid, signal.SIGCONT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, out
    res = json.loads(out.strip().splitlines()[-1])
    assert res["rc"] == 0
    assert res["said"][-1] == {"k": "exit", "code": 7}, res
    # outside a PID namespace this test's own SIGCONTs show its pid (in a jail, 0): no signal that nobody sent
    assert all(r == {"k": "signal", "sig": "SIGCONT", "sender": os.getpid()} for r in res["said"][:-1]), res


def test_a_jail_that_failed_is_the_tools_failure_never_the_submissions_crash():
    """Where init said it failed, every process of the step's namespace died with it: the runner raises, and the
    engine records the run as a failure of diagnose (never evidence), not as a crash of the submission."""
    from diagnose.runs.runner.stages import jail_failed
    assert jail_failed({"walls": {}, "error": "ValueError: -46442256 is not a valid Signals"}) == (
        "the run's jail failed (ValueError: -46442256 is not a valid Signals): the step's processes ended with it")
    assert jail_failed({"walls": {}, "error": None, "signals": []}) is None and jail_failed(None) is None
