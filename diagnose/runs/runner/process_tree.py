"""A run's process tree: every descendant found (a detached fork by its marker, an orphan by becoming its
subreaper), measured (CPU time, run-queue waits, the host's CPU meanwhile), signalled and killed. Takes the
worker's process; gives what it and its descendants did.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import psutil

from diagnose.runs.protocol import MARKER_ENV as MARKER

# A submission can SIGSTOP this process (its parent). A stopped process cannot continue itself, and the
# worker that would may already be gone; so a keeper outside every run's process group and session
# continues us. When we die, even by SIGKILL, the workers die with us (their parent-death signal) and
# the keeper removes our temporary directories (TMP_PREFIX + our pid), then leaves.
TMP_PREFIX = "diagnose-"
# What --keep leaves is renamed out of the keeper's pattern (TMP_PREFIX + our pid): a mark inside the directory
# would be a file the submission could write too, and so outlive its run's cleanup.
KEPT_PREFIX = "diagnose-kept-"
KEEPER_TAG = "diagnose-keeper"     # in its command line: it lives as long as the process that started it


_KEEPER_SRC = """
import glob, os, shutil, signal, sys, time
p, tmp = int(sys.argv[1]), sys.argv[3]
while os.getppid() == p:
    try:
        with open(f"/proc/{p}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                os.kill(p, signal.SIGCONT)
    except (OSError, IndexError):
        break
    time.sleep(0.1)
for _ in range(3):
    left = glob.glob(os.path.join(tmp, sys.argv[2] + str(p) + "-*"))
    if not left:
        break
    for d in left:
        shutil.rmtree(d, ignore_errors=True)
    time.sleep(0.2)
"""


_keeper: subprocess.Popen | None = None
_keeper_lock = threading.Lock()


def ensure_keeper() -> None:
    global _keeper
    with _keeper_lock:
        if _keeper is not None and _keeper.poll() is None:
            return
        try:
            # our temporary root, as we see it: the keeper's own tempfile.gettempdir() would first probe it
            # with a file of a random name, which a listing of TMPDIR at our exit saw (a test's flake)
            _keeper = subprocess.Popen([sys.executable, "-S", "-c", _KEEPER_SRC, str(os.getpid()), TMP_PREFIX,
                                        tempfile.gettempdir(), KEEPER_TAG],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            _keeper = None


def host_cpu_s() -> float | None:
    """CPU seconds every CPU of the host has been busy since boot (/proc/stat), idle and iowait excluded."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    busy = sum(f) - f[3] - (f[4] if len(f) > 4 else 0)
    return busy / os.sysconf("SC_CLK_TCK")


def _run_delay_s(pid: int) -> float | None:
    """Seconds this process's main thread was runnable but waiting for a CPU (Linux schedstat)."""
    try:
        with open(f"/proc/{pid}/schedstat") as fh:
            return int(fh.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


# How long one look at the host's process table serves every run's poll. Each run looks ten times a second, and
# psutil's children() reads all of /proc on every call, once per process it starts from: on an H100 host with 15
# runs that took 0.17 s a look and kept the parent's threads (and each run's end) waiting seconds.
SHARED_TABLE_S = 0.05


class ProcessTable:
    """The host's processes at one moment: parent pid -> children, and pid -> start time (clock ticks)."""

    def __init__(self) -> None:
        self.children: dict[int, list[int]] = {}
        self.start: dict[int, int] = {}
        try:
            names = [n for n in os.listdir("/proc") if n.isdigit()]
        except OSError:       # no /proc: psutil's portable way
            for p in psutil.process_iter(["ppid", "create_time"]):
                self.children.setdefault(p.info["ppid"], []).append(p.pid)
                self.start[p.pid] = int((p.info["create_time"] or 0) * 100)
            return
        for name in names:
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    f = fh.read().rsplit(b")", 1)[1].split()
                pid = int(name)
                self.children.setdefault(int(f[1]), []).append(pid)
                self.start[pid] = int(f[19])
            except (OSError, ValueError, IndexError):
                continue


_table: tuple[float, ProcessTable] | None = None
_table_lock = threading.Lock()


def process_table(max_age_s: float) -> ProcessTable:
    """The host's process table, read again only when the last look is older than max_age_s."""
    global _table
    with _table_lock:
        now = time.monotonic()
        if _table is None or now - _table[0] > max_age_s:
            _table = (now, ProcessTable())
        return _table[1]


def _descendants(table: ProcessTable, pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for c in table.children.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out


class ProcessTree:
    """Every process of this run we have seen, keyed by (pid, create_time) so a reused pid is not ours."""

    def __init__(self, root: psutil.Process, marker: str):
        self.root, self.marker = root, marker
        self.sid = os.getsid(root.pid)
        self.procs: dict[tuple[int, float], psutil.Process] = {}
        self.cpu: dict[tuple[int, float], tuple[float, float]] = {}
        self.delay: dict[tuple[int, float], float] = {}
        self._start: dict[int, int | None] = {}             # pid -> start time in the table, of those added
        self._foreign: set[tuple[int, int | None]] = set()  # our direct children found to be another run's
        self.infra: set[int] = set()       # the run's jail (outer and init): the container, not the run's own work

    def _add(self, p: psutil.Process):
        try:
            self.procs.setdefault((p.pid, p.create_time()), p)
        except psutil.Error:
            pass

    def adopt(self, procs: list) -> None:
        """Processes the worker named as its own before it left ([pid, create_time]): ours, whatever their
        session or environment now says. A pid whose start time differs is someone else's."""
        for item in procs:
            try:
                pid, created = int(item[0]), float(item[1])
                p = psutil.Process(pid)
                if abs(p.create_time() - created) < 0.01:
                    self._add(p)
            except (psutil.Error, ValueError, TypeError, IndexError):
                continue

    def scan(self, fresh: bool = False) -> None:
        """Add every descendant of the processes seen so far, and the orphans re-parented to us that are ours (by
        session or marker). One shared look at the host's process table serves all runs for a moment; `fresh`
        takes a new one (after a freeze, a fork seconds old must not be missed)."""
        self._add(self.root)
        table = process_table(0.0 if fresh else SHARED_TABLE_S)
        for p in list(self.procs.values()):
            for pid in _descendants(table, p.pid):
                self._add_pid(table, pid)
        for pid in table.children.get(os.getpid(), ()):
            # a direct child of ours: a run's worker, the keeper, or an orphan re-parented to us (the workers are
            # subreapers too, so a submission's orphans reach us only once its worker is gone)
            seen = (pid, table.start.get(pid))
            if seen in self._foreign or self._known(table, pid):
                continue
            try:
                c = psutil.Process(pid)
                if os.getsid(pid) == self.sid or c.environ().get(MARKER) == self.marker:
                    self._add_pid(table, pid)
                    for d in _descendants(table, pid):
                        self._add_pid(table, d)
                else:
                    self._foreign.add(seen)
            except (psutil.Error, OSError):
                continue

    def _known(self, table: "ProcessTable", pid: int) -> bool:
        """Added already, with the same start time (a reused pid is another process)."""
        start = table.start.get(pid)
        return start is not None and self._start.get(pid) == start

    def _add_pid(self, table: "ProcessTable", pid: int) -> None:
        if self._known(table, pid):
            return
        try:
            self._add(psutil.Process(pid))
            self._start[pid] = table.start.get(pid)
        except psutil.Error:
            pass

    def measure(self) -> float:
        rss = 0.0
        for key, p in list(self.procs.items()):
            if key[0] in self.infra:
                continue
            try:
                with p.oneshot():
                    rss += p.memory_info().rss
                    t = p.cpu_times()
                    self.cpu[key] = (t.user + t.children_user, t.system + t.children_system)
            except psutil.Error:
                continue
            d = _run_delay_s(key[0])
            if d is not None:
                self.delay[key] = d
        return rss / 2**20

    def alive(self, work_only: bool = False) -> list[psutil.Process]:
        """The tracked processes still running; work_only: not the jail's own (outer and init)."""
        out = []
        for p in self.procs.values():
            if work_only and p.pid in self.infra:
                continue
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

    def signal(self, pgid: int, sig: int) -> None:
        """Stop or continue the whole run: its process group, and any tracked process that left it."""
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for p in list(self.procs.values()):
            try:
                if os.getpgid(p.pid) != pgid:
                    p.send_signal(sig)
            except (psutil.Error, OSError):
                pass

    def kill_all(self, pgid: int) -> list[int]:
        """SIGKILL the group and every tracked process until none is left; return any survivors."""
        deadline = time.time() + 5.0
        # Freeze first, then look: a process that dies before we have seen its descendants hands them
        # to us as orphans without a marker, and a frozen tree cannot fork any more of them.
        self.scan(fresh=True)
        self.signal(pgid, signal.SIGSTOP)
        self.scan(fresh=True)
        while True:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.scan(fresh=True)
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
