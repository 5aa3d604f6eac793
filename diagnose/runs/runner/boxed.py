"""The runner's side of a run's jail (runs/jail.py): what its init says on the status descriptor, and the
step's pids and thread ids as this machine numbers them.

Inside its namespace the step is pid 2 and its threads and children have numbers of their own; the events they
send carry those numbers. The kernel lists each process's numbers in every namespace it belongs to
(/proc/PID/status, NSpid), so the runner finds this machine's number for any of them among the run's processes.
"""
from __future__ import annotations

import os

from diagnose.runs.jail_names import frames
from diagnose.runs.protocol import STEP_PID


class JailStatus:
    """What init said: the walls it made, the step's start and exit, and the signals the run sent it."""

    def __init__(self, fd: int):
        self.fd, self.buf = fd, b""
        os.set_blocking(fd, False)
        self.walls: dict | None = None
        self.refused: str | None = None      # the kernel refused the namespaces: the worker runs unjailed
        self.error: str | None = None        # init failed before the step could start
        self.step: int | None = None         # the step's pid inside
        self.exit: int | None = None         # as Popen.returncode: the code, or minus the signal
        self.signals: list[dict] = []        # signals the run sent its parent (init), with the sender's pid
        self.closed = False

    def read(self) -> None:
        while not self.closed:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                os.close(self.fd)
                return
            recs, self.buf = frames(self.buf + chunk)
            for rec in recs:
                self._take(rec)

    def _take(self, msg: dict) -> None:
        k = msg.get("k")
        if k == "walls":
            self.walls = {key: v for key, v in msg.items() if key != "k"}
        elif k == "refused":
            self.refused = str(msg.get("why"))
        elif k == "error":
            self.error = str(msg.get("why"))
        elif k == "started" and isinstance(msg.get("pid"), int):
            self.step = msg["pid"]
        elif k == "exit":
            self.exit = msg["code"] if isinstance(msg.get("code"), int) else -int(msg.get("signal") or 9)
        elif k == "signal" and len(self.signals) < 50:
            self.signals.append({"signal": str(msg.get("sig")), "from_pid": msg.get("sender")})

    @property
    def jailed(self) -> bool:
        return self.walls is not None

    def inner_step(self) -> int:
        return self.step or STEP_PID


def ns_pid(pid: int, task: int | None = None) -> int | None:
    """The innermost number of a process (or one of its threads) that this machine calls `pid` (`task`)."""
    path = f"/proc/{pid}/task/{task}/status" if task else f"/proc/{pid}/status"
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_pid(candidates, inner: int) -> int | None:
    """Of the run's processes (this machine's pids), the one whose number inside is `inner`."""
    for pid in candidates:
        if pid and ns_pid(pid) == inner and _nested(pid):
            return pid
    return None


def host_tid(pid: int, inner_tid: int) -> int | None:
    """This machine's number for a thread of process `pid` whose number inside is `inner_tid`."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for t in tasks:
        if ns_pid(pid, int(t)) == inner_tid:
            return int(t)
    return None


def _nested(pid: int) -> bool:
    """A process in a namespace below ours (two numbers or more), not one of this machine's own."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return any(len(line.split()) > 2 for line in fh if line.startswith("NSpid:"))
    except OSError:
        return False
