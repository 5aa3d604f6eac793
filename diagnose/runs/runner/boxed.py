"""The runner's side of a run's jail (runs/jail.py): what its init says on the status descriptor, and the
step's pids and thread ids as this machine numbers them.

Inside its namespace the step is pid 2 and its threads and children have numbers of their own; the events they
send carry those numbers. The kernel lists each process's numbers in every namespace it belongs to
(/proc/PID/status, NSpid), so the runner finds this machine's number for any of them among the run's processes.
"""
from __future__ import annotations

import os
import signal
import sys
import time

from diagnose.runs.jail_names import JAIL_ENV, JAIL_SCRIPT, STEP_PID, frames, pack


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
        self.write_fd: int | None = None     # the child's end, until the child has it

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


def jailed(argv: list[str], env: dict, asked: dict) -> tuple[JailStatus, list[str], dict]:
    """argv started in a jail (runs/jail.py) with the walls asked for: the status it will say things on (its
    write_fd goes to the child, which the caller closes once it has started), the argv and the environment."""
    st_r, st_w = os.pipe()
    box = JailStatus(st_r)
    box.write_fd = st_w
    return box, [sys.executable, "-S", JAIL_SCRIPT, str(st_w), "--", *argv], {**env, JAIL_ENV: pack(asked)}


class JailedStep:
    """A step started in its jail, as run_child watches it: its exit (init says it; outer and init live on while
    what the step started lives), and its processes as this machine numbers them."""

    def __init__(self, proc, box: JailStatus, tree, parser):
        self.proc, self.box, self.tree, self.parser = proc, box, tree, parser
        self._host: int | None = None

    @property
    def jailed(self) -> bool:
        return self.box.jailed

    def status(self) -> None:
        """What init said since the last look (written before anything of the step's can be)."""
        box = self.box
        if box.closed:
            return
        box.read()
        if box.jailed:
            self.parser.worker_pid = box.inner_step()
            self.tree.infra.add(self.proc.pid)
            if len(self.tree.infra) < 2 and box.step is not None:
                init = self.host_of(1)
                if init:
                    self.tree.infra.add(init)

    def poll(self) -> int | None:
        """The step's exit status once it has exited; unjailed, or where the jail failed before the step, outer's."""
        rc = self.proc.poll()
        self.status()
        if self.box.exit is not None:
            return self.box.exit
        if not self.box.jailed:
            return rc
        if rc is not None or self.box.closed:       # init is gone without a word of the step's end: it was killed
            self.status()
            return self.box.exit if self.box.exit is not None else -signal.SIGKILL
        return None

    def wait(self, timeout_s: float = 5.0) -> int:
        deadline = time.time() + timeout_s
        while True:
            rc = self.poll()
            if rc is not None:
                return rc
            if time.time() > deadline:
                return -signal.SIGKILL
            time.sleep(0.02)

    def pid(self) -> int:
        """The step's process as this machine numbers it (outer's own until the jail has started it)."""
        if not self.box.jailed:
            return self.proc.pid
        if self._host is None:
            self._host = self.host_of(self.box.inner_step())
        return self._host or self.proc.pid

    def live_pid(self) -> int | None:
        """The step's own process while it lives, as this machine numbers it; None once it has exited. Never
        outer's: killing outer ends init, and with it everything the run's steps left running."""
        if self.poll() is not None:
            return None
        if not self.box.jailed:
            return self.proc.pid
        return self._host or self.host_of(self.box.inner_step())

    def host_of(self, inner: int) -> int | None:
        """This machine's number for a process of the run that named itself `inner` in an event."""
        if not self.box.jailed:
            return inner
        self.tree.scan(fresh=True)
        return host_pid([p.pid for p in self.tree.procs.values()], inner)

    def view(self) -> "StepView":
        return StepView(self)


class StepView:
    """The step as ask_for_stacks needs it (pid, poll, send_signal)."""

    def __init__(self, step: JailedStep):
        self.step, self.pid = step, step.pid()

    def poll(self):
        return self.step.poll()

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)


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
