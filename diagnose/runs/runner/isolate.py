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

import psutil

from diagnose.runs.protocol import DUMP_FD_ENV, FDS_ENV, MARKER_ENV as MARKER
from diagnose.runs.runner.arbiter import GpuArbiter
from diagnose.runs.runner.child import ChildResult, Limits, Tail, deadline_reason, describe_process
from diagnose.runs.runner.events import EventParser
from diagnose.runs.runner.process_tree import ProcessTree, ensure_keeper, host_cpu_s
from diagnose.runs.runner.stacks import ask_for_stacks, signame, tail_of
from diagnose.runs.subreaper import become_subreaper

POLL_S = 0.1
REPORT_CAP = 256 * 1024           # what a problem's evaluator writes to its report descriptor


become_subreaper()



def run_child(argv: list[str], cwd: str, env: dict, stacks_path: str, limits: Limits,
              arbiter: GpuArbiter | None = None, owner: str = "", stop: threading.Event | None = None,
              on_event=None, others=None, report: bool = False, linger: bool = False) -> ChildResult:
    """Run argv to completion or to its deadline. `on_event(ev)` sees every well-formed event as it
    arrives; `others()` names the other runs alive right now (overlap evidence); `report` gives the child
    a descriptor for a problem evaluator's own report, read back into ChildResult.report; `linger` leaves
    what the process started alive at its end (ChildResult.lingering), as a harness container does."""
    ensure_keeper()
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
    popcorn = Tail(os.fdopen(pop_r, "rb"), cap=REPORT_CAP) if report else None
    res.pid = proc.pid
    out, err = Tail(proc.stdout), Tail(proc.stderr)
    parser = EventParser(worker_pid=proc.pid)
    tree = ProcessTree(psutil.Process(proc.pid), marker)
    overlapped: set[str] = set()
    if arbiter:
        arbiter.register(owner, lambda on: tree.signal(proc.pid, signal.SIGSTOP if on else signal.SIGCONT))
    loads: list[float] = []
    cpus = os.cpu_count() or 1
    host0 = host_cpu_s()

    def grant(lock_id: int):
        try:
            os.write(rep_w, f"{lock_id}\n".encode())
        except OSError:
            pass

    def handle(ev: dict) -> None:
        if ev["k"] == "outlive":
            tree.adopt(ev["procs"])
            return
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

    def watch(now: float) -> str | None:
        """One look at the process tree (its processes, their memory) and at the limits: why to stop, if any."""
        tree.scan()
        res.max_procs = max(res.max_procs, len(tree.procs))
        res.peak_rss_mb = max(res.peak_rss_mb, tree.measure())
        return deadline_reason(res, now, arbiter.held_up(owner, now) if arbiter else 0.0, limits, stop)

    try:
        last_poll = 0.0
        while proc.poll() is None:
            drain(POLL_S / 2)
            now = time.time()
            if now - last_poll < POLL_S:
                continue
            last_poll = now
            loads.append(os.getloadavg()[0] / cpus)
            if others is not None:
                overlapped |= set(others())
            reason = watch(now)
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
                res.kernel_waits = ask_for_stacks(proc, stacks_rd, dump_w,
                                                   dump_tid if isinstance(dump_tid, int) else None)
                if spawned:
                    time.sleep(0.5)     # their files, too, need a moment
                break
        if not res.killed:
            # The harness's subprocess.run waits for the process to exit AND for its stdout and stderr to
            # close: a child that inherited them (a forgotten monitor) keeps the step open to its deadline.
            exited = time.time()
            while (out.is_alive() or err.is_alive()) and not res.killed:
                drain(POLL_S / 2)
                now = time.time()
                reason = watch(now)
                if reason:
                    res.killed, res.kill_t = reason, now
                    res.exited_s = round(exited - res.start_t, 4)
                    res.held_by = [describe_process(p) for p in tree.alive() if p.pid != proc.pid][:5]
        tree.measure()
        if arbiter:      # before the kill: a section this child held ends, and its pauses close, now
            arbiter.forget(owner)
        if linger and res.killed not in ("max_rss", "interrupted"):
            # As in the harness's container: the step's own process ends (the harness kills only it), what it
            # started lives on until the run's container ends (StageRunner kills it then)
            try:
                proc.kill()
            except OSError:
                pass
            res.lingering = tree
        else:
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
    res.exit_code, res.signal = (rc, None) if rc >= 0 else (None, signame(-rc))
    res.cpu_s = sum(u + s for u, s in tree.cpu.values())
    res.user_s = sum(u for u, _ in tree.cpu.values())
    res.run_delay_s = round(sum(tree.delay.values()), 3)
    res.load_per_cpu = round(sum(loads) / len(loads), 3) if loads else round(os.getloadavg()[0] / cpus, 3)
    host1 = host_cpu_s()
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
    res.stacks = tail_of(stacks_rd, 64 * 1024)
    os.close(stacks_rd)
    os.close(dump_w)
    for path in sorted(glob.glob(glob.escape(stacks_path) + ".*")):    # the evaluator's pool workers
        try:   # non-blocking, and only a regular file: these paths are in the submission's reach
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            text = tail_of(fd, 32 * 1024) if stat.S_ISREG(os.fstat(fd).st_mode) else ""
        finally:
            os.close(fd)
        if text.strip():
            res.stacks += f"\n== process {path.rsplit('.', 1)[-1]} (spawned by the evaluator) ==\n{text}"
    if not res.stacks.strip() and res.kernel_waits:
        res.stacks = ("(the process wrote no Python stacks when asked; the kernel says:)\n" + res.kernel_waits)
    return res


def python_argv(spec_path: str) -> list[str]:
    return [sys.executable, "-m", "diagnose.runs.worker", spec_path]


