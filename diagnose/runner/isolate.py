"""Run one child in isolation and always get a record back, however the child ends.

The child starts in a new session (its own process group) with stdin closed and stdout/stderr on pipes
whose tails we keep (capped: a submission may print gigabytes). While it runs we poll its whole process
tree with psutil: peak RSS, CPU time, and every descendant we have ever seen, so that a grandchild that
called setsid() and left the group is still found and killed. Descendants also carry a marker in their
environment, and this process is made a child subreaper, so an orphan re-parents to us and is found too.

On the deadline: SIGUSR1 asks the child's faulthandler for every thread's stack, a short grace lets it
write, then SIGKILL goes to the group and to every tracked process, and we verify nothing survived.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field

import psutil

TAIL_BYTES = 32 * 1024
POLL_S = 0.1
STACK_GRACE_S = 2.0
MARKER = "DIAGNOSE_RUN_MARKER"


def _become_subreaper() -> None:
    """Orphaned descendants re-parent to us instead of init, so a detached fork stays findable."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


_become_subreaper()


@dataclass
class ChildResult:
    exit_code: int | None = None
    signal: str | None = None
    start_t: float = 0.0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    user_s: float = 0.0
    peak_rss_mb: float = 0.0
    killed: str | None = None          # deadline | max_rss | interrupted | cutoff
    kill_t: float | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stacks: str = ""
    events: list[dict] = field(default_factory=list)
    survivors: list[int] = field(default_factory=list)
    max_procs: int = 0


class _Tail(threading.Thread):
    """Drain a pipe, keeping only its last TAIL_BYTES: the child never blocks on a full pipe."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe, self.buf, self.total = pipe, bytearray(), 0
        self.start()

    def run(self):
        while chunk := self.pipe.read1(65536) if hasattr(self.pipe, "read1") else self.pipe.read(65536):
            self.total += len(chunk)
            self.buf += chunk
            if len(self.buf) > 2 * TAIL_BYTES:
                del self.buf[:-TAIL_BYTES]
        self.pipe.close()

    def text(self) -> str:
        return bytes(self.buf[-TAIL_BYTES:]).decode("utf-8", "replace")


class _EventReader:
    """Incrementally read the JSON-lines event file; only whole lines count."""

    def __init__(self, path: str):
        self.path, self.offset, self.partial, self.events = path, 0, b"", []

    def poll(self) -> list[dict]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        new = []
        for line in lines:
            try:
                new.append(json.loads(line))
            except ValueError:
                continue
        self.events += new
        return new


class _Tree:
    """Every process of this run we have seen, keyed by (pid, create_time) so a reused pid is not ours."""

    def __init__(self, root: psutil.Process, marker: str):
        self.root, self.marker = root, marker
        self.procs: dict[tuple[int, float], psutil.Process] = {}
        self.cpu: dict[tuple[int, float], tuple[float, float]] = {}

    def _add(self, p: psutil.Process):
        try:
            self.procs.setdefault((p.pid, p.create_time()), p)
        except psutil.Error:
            pass

    def scan(self) -> None:
        self._add(self.root)
        for p in list(self.procs.values()):
            try:
                for c in p.children(recursive=True):
                    self._add(c)
            except psutil.Error:
                pass
        try:
            ours = psutil.Process().children(recursive=True)
        except psutil.Error:
            ours = []
        for c in ours:  # orphans that re-parented to us (subreaper) and still carry our marker
            try:  # one zombie or vanished process must not hide the others
                key = (c.pid, c.create_time())
                if key not in self.procs and c.environ().get(MARKER) == self.marker:
                    self.procs[key] = c
            except psutil.Error:
                continue

    def measure(self) -> float:
        rss = 0.0
        for key, p in list(self.procs.items()):
            try:
                with p.oneshot():
                    rss += p.memory_info().rss
                    t = p.cpu_times()
                    self.cpu[key] = (t.user + t.children_user, t.system + t.children_system)
            except psutil.Error:
                continue
        return rss / 2**20

    def alive(self) -> list[psutil.Process]:
        out = []
        for p in self.procs.values():
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.Error:
                pass
        return out

    def _reap(self) -> None:
        """Orphans re-parented to us are our children now: collect their exit status, or they linger
        as zombies for as long as this process lives."""
        for p in self.procs.values():
            try:
                if p.ppid() == os.getpid():
                    os.waitpid(p.pid, os.WNOHANG)
            except (psutil.Error, ChildProcessError, OSError):
                pass

    def kill_all(self, pgid: int) -> list[int]:
        """SIGKILL the group and every tracked process until none is left; return any survivors."""
        deadline = time.time() + 5.0
        while True:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.scan()
            alive = self.alive()
            for p in alive:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            if not alive:
                self._reap()
                return []
            if time.time() > deadline:
                return [p.pid for p in alive]
            time.sleep(0.05)


def run_child(argv: list[str], cwd: str, env: dict, events_path: str, stacks_path: str, budget_s: float,
              max_rss_mb: float | None = None, stop: threading.Event | None = None,
              on_event=None, cutoff=None) -> ChildResult:
    """Run argv to completion or to its deadline. `on_event(ev)` sees events live; `cutoff(events)`
    returning a reason string stops the run early (the scheduler's early cutoff)."""
    marker = uuid.uuid4().hex
    env = {**env, MARKER: marker}
    res = ChildResult(start_t=time.time())
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    out, err = _Tail(proc.stdout), _Tail(proc.stderr)
    reader = _EventReader(events_path)
    tree = _Tree(psutil.Process(proc.pid), marker)
    while proc.poll() is None:
        tree.scan()
        res.max_procs = max(res.max_procs, len(tree.procs))
        res.peak_rss_mb = max(res.peak_rss_mb, tree.measure())
        for ev in reader.poll():
            if on_event:
                on_event(ev)
        elapsed = time.time() - res.start_t
        reason = None
        if elapsed > budget_s:
            reason = "deadline"
        elif max_rss_mb and res.peak_rss_mb > max_rss_mb:
            reason = "max_rss"
        elif stop is not None and stop.is_set():
            reason = "interrupted"
        elif cutoff is not None:
            reason = cutoff(reader.events)
        if reason:
            res.killed, res.kill_t = reason, time.time()
            _ask_for_stacks(proc, stacks_path)
            break
        time.sleep(POLL_S)
    res.survivors = tree.kill_all(proc.pid)
    rc = proc.wait()
    res.wall_s = (res.kill_t or time.time()) - res.start_t
    out.join(2.0)
    err.join(2.0)
    res.exit_code, res.signal = (rc, None) if rc >= 0 else (None, signal.Signals(-rc).name)
    res.cpu_s = sum(u + s for u, s in tree.cpu.values())
    res.user_s = sum(u for u, _ in tree.cpu.values())
    res.stdout_tail, res.stderr_tail = out.text(), err.text()
    res.stdout_bytes, res.stderr_bytes = out.total, err.total
    for ev in reader.poll():
        if on_event:
            on_event(ev)
    res.events = reader.events
    try:
        with open(stacks_path, encoding="utf-8", errors="replace") as fh:
            res.stacks = fh.read()[-64 * 1024:]
    except FileNotFoundError:
        pass
    return res


def _ask_for_stacks(proc: subprocess.Popen, stacks_path: str) -> None:
    """SIGUSR1 -> the child's faulthandler writes all stacks; wait until the file stops growing."""
    try:
        proc.send_signal(signal.SIGUSR1)
    except ProcessLookupError:
        return
    end, last = time.time() + STACK_GRACE_S, -1
    while time.time() < end and proc.poll() is None:
        time.sleep(0.1)
        try:
            size = os.path.getsize(stacks_path)
        except OSError:
            size = 0
        if size and size == last:
            return
        last = size


def python_argv(spec_path: str) -> list[str]:
    return [sys.executable, "-m", "diagnose.worker", spec_path]
