"""Run one child in isolation and always get a record back, however the child ends.

The child starts in a new session (its own process group) with stdin closed and stdout/stderr on pipes
whose tails we keep (capped: a submission may print gigabytes). Its events come back on a pipe it
inherited by descriptor (no path names it), read without ever blocking; every event is checked for
shape, and one that is malformed is recorded as an anomaly, never trusted. Timing-section requests on
that pipe go to the arbiter, which may also pause this child while another run times; the deadline moves
by exactly the time the parent kept the child waiting or paused.

While it runs we poll its whole process tree with psutil: peak RSS, CPU time, the time its processes
waited for a CPU (run_delay in /proc/PID/schedstat), and every descendant we have ever seen, so that a
grandchild that called setsid() and left the group is still found and killed. Descendants carry a
marker in their environment and this process is a child subreaper, so orphans re-parent to us; a
descendant that cleared its environment is still ours by session id.

On the deadline: SIGUSR1 asks the child's faulthandler for every thread's stack, a short grace lets it
write, then SIGKILL goes to the group and to every tracked process, and we verify nothing survived.
"""
from __future__ import annotations

import ctypes
import glob
import os
import select
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field

import psutil

from diagnose.protocol import DUMP_FD_ENV, FDS_ENV, MARKER_ENV as MARKER
from diagnose.runner.arbiter import GpuArbiter
from diagnose.runner.events import EventParser

TAIL_BYTES = 32 * 1024
POLL_S = 0.1
STACK_GRACE_S = 2.0
REPORT_CAP = 256 * 1024           # what a problem's evaluator writes to its report descriptor


def _become_subreaper() -> None:
    """Orphaned descendants re-parent to us instead of init, so a detached fork stays findable."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


_become_subreaper()

# A submission can SIGSTOP this process (its parent). A stopped process cannot continue itself, and the
# worker that would may already be gone; so a keeper outside every run's process group and session
# continues us. When we die, even by SIGKILL, the workers die with us (their parent-death signal) and
# the keeper removes our temporary directories (TMP_PREFIX + our pid), then leaves.
TMP_PREFIX = "diagnose-"
KEEPER_TAG = "diagnose-keeper"     # in its command line: it lives as long as the process that started it
_KEEPER_SRC = """
import glob, os, shutil, signal, sys, tempfile, time
p = int(sys.argv[1])
while os.getppid() == p:
    try:
        with open(f"/proc/{p}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                os.kill(p, signal.SIGCONT)
    except (OSError, IndexError):
        break
    time.sleep(0.1)
for _ in range(3):
    left = glob.glob(os.path.join(tempfile.gettempdir(), sys.argv[2] + str(p) + "-*"))
    if not left:
        break
    for d in left:
        shutil.rmtree(d, ignore_errors=True)
    time.sleep(0.2)
"""
_keeper: subprocess.Popen | None = None
_keeper_lock = threading.Lock()


def _ensure_keeper() -> None:
    global _keeper
    with _keeper_lock:
        if _keeper is not None and _keeper.poll() is None:
            return
        try:
            _keeper = subprocess.Popen([sys.executable, "-S", "-c", _KEEPER_SRC, str(os.getpid()), TMP_PREFIX,
                                        KEEPER_TAG],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            _keeper = None


@dataclass
class ChildResult:
    exit_code: int | None = None
    signal: str | None = None
    start_t: float = 0.0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    user_s: float = 0.0
    peak_rss_mb: float = 0.0
    killed: str | None = None          # deadline | max_rss | interrupted
    kill_t: float | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stacks: str = ""
    events: list[dict] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    survivors: list[int] = field(default_factory=list)
    max_procs: int = 0
    pid: int = 0
    lock_waits: list[dict] = field(default_factory=list)   # {start_s, seconds, mode: wait | pause}
    held_up: list[tuple[float, float]] = field(default_factory=list)   # absolute (start, end) of those
    run_delay_s: float = 0.0
    load_per_cpu: float = 0.0
    others_cpu_s: float = 0.0          # CPU time the whole host spent outside this run meanwhile
    overlapped: list[str] = field(default_factory=list)
    report: str = ""                   # a problem's evaluator's own report (POPCORN_FD), when it ran one
    kernel_waits: str = ""             # when no Python stack came: each thread's kernel wait channel


class _Tail(threading.Thread):
    """Drain a pipe, keeping only its last `cap` bytes: the child never blocks on a full pipe."""

    def __init__(self, pipe, cap: int = TAIL_BYTES):
        super().__init__(daemon=True)
        self.pipe, self.buf, self.total, self.cap = pipe, bytearray(), 0, cap
        self.start()

    def run(self):
        while chunk := self.pipe.read1(65536) if hasattr(self.pipe, "read1") else self.pipe.read(65536):
            self.total += len(chunk)
            self.buf += chunk
            if len(self.buf) > 2 * self.cap:
                del self.buf[:-self.cap]
        self.pipe.close()

    def text(self) -> str:
        return bytes(self.buf[-self.cap:]).decode("utf-8", "replace")


def _host_cpu_s() -> float | None:
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


class _Tree:
    """Every process of this run we have seen, keyed by (pid, create_time) so a reused pid is not ours."""

    def __init__(self, root: psutil.Process, marker: str):
        self.root, self.marker = root, marker
        self.sid = os.getsid(root.pid)
        self.procs: dict[tuple[int, float], psutil.Process] = {}
        self.cpu: dict[tuple[int, float], tuple[float, float]] = {}
        self.delay: dict[tuple[int, float], float] = {}

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
        for c in ours:  # orphans re-parented to us (subreaper): ours by marker, or by session
            try:  # one zombie or vanished process must not hide the others
                key = (c.pid, c.create_time())
                if key in self.procs:
                    continue
                if os.getsid(c.pid) == self.sid or c.environ().get(MARKER) == self.marker:
                    self.procs[key] = c
            except (psutil.Error, OSError):
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
            d = _run_delay_s(key[0])
            if d is not None:
                self.delay[key] = d
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
        self.scan()
        self.signal(pgid, signal.SIGSTOP)
        self.scan()
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


@dataclass
class Limits:
    budget_s: float
    max_rss_mb: float | None = None


def run_child(argv: list[str], cwd: str, env: dict, stacks_path: str, limits: Limits,
              arbiter: GpuArbiter | None = None, owner: str = "", stop: threading.Event | None = None,
              on_event=None, others=None, report: bool = False) -> ChildResult:
    """Run argv to completion or to its deadline. `on_event(ev)` sees every well-formed event as it
    arrives; `others()` names the other runs alive right now (overlap evidence); `report` gives the child
    a descriptor for a problem evaluator's own report, read back into ChildResult.report."""
    _ensure_keeper()
    marker = uuid.uuid4().hex
    owner = owner or marker
    ev_r, ev_w = os.pipe()
    rep_r, rep_w = os.pipe()
    dump_r, dump_w = os.pipe()       # "dump your stacks now", read by the child's watchdog thread
    os.set_blocking(dump_w, False)
    pop_r, pop_w = os.pipe() if report else (None, None)
    stacks_fd = os.open(stacks_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    # Read the stacks back through our own descriptor of the same file: the submission can unlink or
    # replace the path (with a FIFO, say), never the file we hold.
    stacks_rd = os.open(stacks_path, os.O_RDONLY)
    os.set_blocking(ev_r, False)
    child_fds = [ev_w, rep_r, stacks_fd] + ([pop_w] if report else [])
    env = {**env, MARKER: marker, FDS_ENV: ",".join(map(str, child_fds)), DUMP_FD_ENV: str(dump_r)}
    child_fds.append(dump_r)
    res = ChildResult(start_t=time.time())
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, pass_fds=tuple(child_fds))
    finally:
        for fd in child_fds:
            os.close(fd)
    popcorn = _Tail(os.fdopen(pop_r, "rb"), cap=REPORT_CAP) if report else None
    res.pid = proc.pid
    out, err = _Tail(proc.stdout), _Tail(proc.stderr)
    parser = EventParser(worker_pid=proc.pid)
    tree = _Tree(psutil.Process(proc.pid), marker)
    overlapped: set[str] = set()
    if arbiter:
        arbiter.register(owner, lambda on: tree.signal(proc.pid, signal.SIGSTOP if on else signal.SIGCONT))
    loads: list[float] = []
    cpus = os.cpu_count() or 1
    host0 = _host_cpu_s()

    def grant(lock_id: int):
        try:
            os.write(rep_w, f"{lock_id}\n".encode())
        except OSError:
            pass

    def handle(ev: dict) -> None:
        if ev["k"] == "lock":
            if arbiter is None:
                parser.anomaly("a timing-section request, though this run was offered no arbitration")
                return
            if ev["op"] == "acquire":
                arbiter.acquire(owner, lambda i=ev["id"]: grant(i))
            else:
                arbiter.release(owner)
            return
        if on_event:
            on_event(ev)

    def drain(block_s: float) -> None:
        try:
            ready, _, _ = select.select([ev_r], [], [], block_s)
        except (OSError, ValueError):
            return
        if not ready:
            return
        while True:
            try:
                chunk = os.read(ev_r, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                return
            if not chunk:
                return
            for ev in parser.feed(chunk):
                handle(ev)

    try:
        last_poll = 0.0
        while proc.poll() is None:
            drain(POLL_S / 2)
            now = time.time()
            if now - last_poll < POLL_S:
                continue
            last_poll = now
            tree.scan()
            res.max_procs = max(res.max_procs, len(tree.procs))
            res.peak_rss_mb = max(res.peak_rss_mb, tree.measure())
            loads.append(os.getloadavg()[0] / cpus)
            if others is not None:
                overlapped |= set(others())
            held_up = arbiter.held_up(owner, now) if arbiter else 0.0
            reason = None
            if now - res.start_t - held_up > limits.budget_s:
                reason = "deadline"
            elif limits.max_rss_mb and res.peak_rss_mb > limits.max_rss_mb:
                reason = "max_rss"
            elif stop is not None and stop.is_set():
                reason = "interrupted"
            if reason:
                res.killed, res.kill_t = reason, now
                dump_tid = next((e.get("dump_tid") for e in parser.events if e["k"] == "worker_start"
                                 and e["pid"] == proc.pid), None)
                spawned = 0
                for e in parser.events:    # processes the evaluator spawned dump into files of their own
                    if e["k"] == "worker_start" and e.get("child") and e["pid"] != proc.pid:
                        try:
                            os.kill(e["pid"], signal.SIGUSR1)
                            spawned += 1
                        except OSError:
                            pass
                res.kernel_waits = _ask_for_stacks(proc, stacks_rd, dump_w,
                                                   dump_tid if isinstance(dump_tid, int) else None)
                if spawned:
                    time.sleep(0.5)     # their files, too, need a moment
                break
        tree.measure()
        if arbiter:      # before the kill: a section this child held ends, and its pauses close, now
            arbiter.forget(owner)
        res.survivors = tree.kill_all(proc.pid)
        rc = proc.wait()
    finally:
        if arbiter:
            arbiter.forget(owner)
        os.close(rep_w)
    res.wall_s = (res.kill_t or time.time()) - res.start_t
    drain(0)
    os.close(ev_r)
    out.join(2.0)
    err.join(2.0)
    if popcorn:
        popcorn.join(2.0)
        res.report = popcorn.text()
    res.exit_code, res.signal = (rc, None) if rc >= 0 else (None, _signame(-rc))
    res.cpu_s = sum(u + s for u, s in tree.cpu.values())
    res.user_s = sum(u for u, _ in tree.cpu.values())
    res.run_delay_s = round(sum(tree.delay.values()), 3)
    res.load_per_cpu = round(sum(loads) / len(loads), 3) if loads else round(os.getloadavg()[0] / cpus, 3)
    host1 = _host_cpu_s()
    if host0 is not None and host1 is not None:
        # what the rest of the host (other runs, other programs) kept the CPUs busy with meanwhile: a
        # measure that CPU hogs cannot escape, unlike the load average, which lags by a minute
        res.others_cpu_s = round(max(0.0, host1 - host0 - res.cpu_s), 3)
    res.overlapped = sorted(overlapped)
    res.stdout_tail, res.stderr_tail = out.text(), err.text()
    res.stdout_bytes, res.stderr_bytes = out.total, err.total
    res.events, res.anomalies = parser.events, parser.anomalies
    if arbiter:
        # Only within the run's measured wall time: after a deadline the process lives on while its stacks
        # are dumped, and a pause then must not be taken off the time it was charged.
        end = res.start_t + res.wall_s
        ivs = [(max(a, res.start_t), min(b, end), k) for a, b, k in arbiter.intervals(owner)
               if min(b, end) - max(a, res.start_t) > 0.005]
        res.lock_waits = [{"start_s": round(a - res.start_t, 4), "seconds": round(b - a, 4), "mode": k}
                          for a, b, k in ivs]
        res.held_up = [(a, b) for a, b, k in ivs if k != "overrun"]
    res.stacks = _tail_of(stacks_rd, 64 * 1024)
    os.close(stacks_rd)
    os.close(dump_w)
    for path in sorted(glob.glob(glob.escape(stacks_path) + ".*")):    # the evaluator's pool workers
        try:   # non-blocking, and only a regular file: these paths are in the submission's reach
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            text = _tail_of(fd, 32 * 1024) if stat.S_ISREG(os.fstat(fd).st_mode) else ""
        finally:
            os.close(fd)
        if text.strip():
            res.stacks += f"\n== process {path.rsplit('.', 1)[-1]} (spawned by the evaluator) ==\n{text}"
    if not res.stacks.strip() and res.kernel_waits:
        res.stacks = ("(the process wrote no Python stacks when asked; the kernel says:)\n" + res.kernel_waits)
    return res


_TGKILL = {"x86_64": 234, "aarch64": 131}


def _tgkill(pid: int, tid: int, sig: int) -> bool:
    """Signal one thread of a process: the child's watchdog thread, which is always asleep and never
    blocks the signal, so the request for stacks is answered even when the main thread is stuck inside
    the GPU driver."""
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "tgkill", None)
    if fn is not None:
        return fn(pid, tid, sig) == 0
    nr = _TGKILL.get(os.uname().machine)
    return nr is not None and libc.syscall(nr, pid, tid, sig) == 0


def _kernel_waits(pid: int) -> str:
    """Each thread's state and kernel wait channel: what little the kernel can say when Python cannot."""
    lines = []
    try:
        for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int)[:32]:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                    stat = fh.read()
                name = stat[stat.index("(") + 1: stat.rindex(")")]
                state = stat.rsplit(")", 1)[1].split()[0]
                with open(f"/proc/{pid}/task/{tid}/wchan") as fh:
                    wchan = fh.read().strip() or "-"
                lines.append(f"thread {tid} ({name}): state {state}, waiting in {wchan}")
            except (OSError, ValueError):
                continue
    except OSError:
        pass
    return "\n".join(lines)


def _signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def _tail_of(fd: int, cap: int) -> str:
    """The last `cap` bytes of a regular file, read through a descriptor we hold."""
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, cap, max(0, size - cap)).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _ask_for_stacks(proc: subprocess.Popen, stacks_rd: int, dump_w: int, dump_tid: int | None) -> str:
    """Ask the child for every thread's stack and wait until the stacks file stops growing. First through
    the dump pipe, which its watchdog thread reads between naps: that thread runs whenever the main thread
    waits in C with the GIL released, as in a CUDA synchronize, where a signal sent to a CUDA process was
    seen to write nothing. Then, if nothing came, SIGUSR1 to that thread (faulthandler's C handler, for a
    main thread that holds the GIL). If still nothing, what the kernel says each thread waits in."""
    try:
        os.write(dump_w, b"d")
    except OSError:
        pass
    if _grown(proc, stacks_rd, 1.0):
        return ""
    try:
        if not (dump_tid and _tgkill(proc.pid, dump_tid, signal.SIGUSR1)):
            proc.send_signal(signal.SIGUSR1)
    except ProcessLookupError:
        return ""
    return "" if _grown(proc, stacks_rd, STACK_GRACE_S) else _kernel_waits(proc.pid)


def _grown(proc: subprocess.Popen, stacks_rd: int, wait_s: float) -> bool:
    """Whether the stacks file got content within wait_s; returns once it stops growing."""
    end, last, size = time.time() + wait_s, -1, 0
    while time.time() < end and proc.poll() is None:
        time.sleep(0.1)
        try:
            size = os.fstat(stacks_rd).st_size
        except OSError:
            size = 0
        if size and size == last:
            return True
        last = size
    return bool(size)


def python_argv(spec_path: str) -> list[str]:
    return [sys.executable, "-m", "diagnose.worker", spec_path]


