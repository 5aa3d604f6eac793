"""What `run` and `check` print when piped (as in CI): plain lines, no colour codes, no wrapping, in the
order things finish. Checked against expected text with the measured numbers masked."""
import re

import pytest

from tests.conftest import FIXTURES, ROOT, cli

pytestmark = pytest.mark.e2e     # every test here starts real processes

GOLDEN = ROOT / "tests" / "golden"


def _masked(text: str, out) -> str:
    """Measured numbers masked, and the host-busy warning dropped: whether it appears depends on what else
    the machine is doing (it is tested on its own in test_trust)."""
    text = "".join(line for line in text.replace(str(out), "<OUT>").splitlines(keepends=True)
                   if "warning: the host was busy" not in line)
    text = re.sub(r"\d+(?:\.\d+)?", "<n>", text)
    # a table's padding follows its numbers' widths: compare its cells, not its spaces and rules
    return re.sub(r"([─━ ])\1+", r"\1", text)


def test_piped_run_prints_plain_lines_as_expected(tmp_path):
    out = tmp_path / "o"
    res = cli("run", FIXTURES / "healthy.py", "-p", "none", "-s", "compile,test", "-b", "60", "-o", out,
              env={"CI": "", "COLUMNS": "40"})
    assert res.returncode == 0, res.stderr
    assert "\x1b[" not in res.stdout + res.stderr
    got = _masked(res.stderr + "---\n" + res.stdout, out)
    assert got == (GOLDEN / "piped_run.txt").read_text()
    # never wrapped at COLUMNS=40: the stage lines are longer than that, and still one line each
    assert any(len(line) > 40 for line in res.stderr.splitlines())


def test_piped_check_quiet_prints_only_the_verdict(tmp_path):
    res = cli("check", FIXTURES / "hostile" / "returns_none.py", "-b", "30", "-q")
    assert res.returncode == 1
    assert res.stdout.strip().splitlines() == ["FAILS (wrong)"]
    assert res.stderr == ""


def test_piped_check_prints_plain_lines_as_expected(tmp_path):
    out = tmp_path / "o"
    res = cli("check", FIXTURES / "hostile" / "returns_none.py", "-b", "30", "-o", out, env={"CI": ""})
    assert res.returncode == 1, res.stderr
    assert "\x1b[" not in res.stdout + res.stderr
    assert _masked(res.stderr + "---\n" + res.stdout, out) == (GOLDEN / "piped_check.txt").read_text()


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _in_a_terminal(args, timeout=240) -> tuple[int, str]:
    """Run diagnose on a pseudo-terminal, as a user at a shell would, and return its exit code and all it wrote."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(PYTHONPATH=str(ROOT), TERM="xterm-256color", COLUMNS="120", LINES="40")
    proc = subprocess.Popen([sys.executable, "-m", "diagnose", *map(str, args)], stdin=slave, stdout=slave,
                            stderr=slave, env=env, cwd=ROOT, close_fds=True)
    os.close(slave)
    buf, end = b"", time.time() + timeout
    try:
        while time.time() < end:
            if select.select([master], [], [], 0.5)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:      # EIO: the last writer closed the terminal
                    break
                if not chunk:
                    break
                buf += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    return proc.returncode, buf.decode("utf-8", errors="replace")


def test_in_a_terminal_progress_is_live_and_its_last_frame_stays(tmp_path):
    """On a terminal: live rows redrawn in place (cursor movement, colour), a 'k of N runs done' line, and
    after the last redraw the final frame and the verdict stay on screen."""
    rc, text = _in_a_terminal(["run", FIXTURES / "healthy.py", "-p", "none", "-s", "compile,test", "-b", "60",
                               "-o", tmp_path / "o"])
    assert rc == 0, text
    assert "\x1b[" in text                                   # drawn live, not as plain lines
    plain = ANSI.sub("", text).replace("\r", "")
    assert "1 of 1 runs done" in plain
    tail = plain[plain.rindex("1 of 1 runs done"):]         # the last frame is kept, the verdict under it
    assert "r0" in tail and "ok" in tail and "OK every stage passed" in tail
    assert "report:" in tail.splitlines()[-1] or any("report:" in line for line in tail.splitlines()[-3:])
