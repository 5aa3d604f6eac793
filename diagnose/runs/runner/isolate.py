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

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid

import psutil

from diagnose.runs.protocol import DUMP_FD_ENV, FDS_ENV, MARKER_ENV as MARKER
from diagnose.runs.runner.arbiter import GpuArbiter
from diagnose.runs.runner.boxed import JailedStep, JailStatus, jailed
from diagnose.runs.runner.child import ChildResult, Limits, Tail, deadline_reason, describe_process
from diagnose.runs.runner.events import EventParser
from diagnose.runs.runner.process_tree import ProcessTree, ensure_keeper, host_cpu_s
from diagnose.runs.runner.stacks import dump_stacks, signame, spawned_stacks, tail_of
from diagnose.runs.subreaper import become_subreaper

POLL_S = 0.1
REPORT_CAP = 256 * 1024           # what a problem's evaluator writes to its report descriptor


become_subreaper()


def run_child(argv: list[str], cwd: str, env: dict, stacks_path: str, limits: Limits,
              arbiter: GpuArbiter | None = None, owner: str = "", stop: threading.Event | None = None,
              on_event=None, others=None, report: bool = False, linger: bool = False, nice: int = 0,
              jail: dict | None = None, spawned_stacks: str | None = None) -> ChildResult:
    """Run argv to completion or to its deadline. `on_event(ev)` sees every well-formed event as it
    arrives; `others()` names the other runs alive right now (overlap evidence); `report` gives the child
    a descriptor for a problem evaluator's own report, read back into ChildResult.report; `linger` leaves
    what the process started alive at its end (ChildResult.lingering), as a harness container does; `nice`
    lowers its CPU priority (and its descendants', who inherit it) so that it yields the CPU to the baseline;
    `jail` (the walls asked for: runs/jail.py) runs it in a process space, network and file system of its own."""
    ensure_keeper()
    child = _Child(stacks_path, limits, arbiter, owner, stop, on_event, report, jail)
    child.spawned_stacks = spawned_stacks or stacks_path
    child.spawn(argv, cwd, env)
    if nice:
        try:
            os.setpriority(os.PRIO_PROCESS, child.proc.pid, nice)
        except OSError:
            pass
    try:
        child.watch_until_end(others)
        rc = child.end(linger)
    finally:
        child.close_lock()
    return child.collect(rc)


class _Child:
    """One child process and its descriptors, from spawn to the record: what run_child holds between steps."""

    def __init__(self, stacks_path: str, limits: Limits, arbiter: GpuArbiter | None, owner: str,
                 stop: threading.Event | None, on_event, report: bool, jail: dict | None = None):
        self.stacks_path, self.limits, self.arbiter, self.stop, self.on_event = \
            stacks_path, limits, arbiter, stop, on_event
        self.marker = uuid.uuid4().hex
        self.owner = owner or self.marker
        self.res = ChildResult(start_t=time.time())
        self.loads: list[float] = []
        self.overlapped: set[str] = set()
        self.cpus = os.cpu_count() or 1
        self.host0 = host_cpu_s()
        self.ev_r, self.ev_w = os.pipe()
        self.rep_r, self.rep_w = os.pipe()
        self.dump_r, self.dump_w = os.pipe()       # "dump your stacks now", read by the child's watchdog thread
        os.set_blocking(self.dump_w, False)
        self.pop_r, self.pop_w = os.pipe() if report else (None, None)
        self.stacks_fd = os.open(stacks_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        # Read the stacks back through our own descriptor of the same file: the submission can unlink or
        # replace the path (with a FIFO, say), never the file we hold.
        self.stacks_rd = os.open(stacks_path, os.O_RDONLY)
        os.set_blocking(self.ev_r, False)
        self.jail = jail
        self.box: JailStatus | None = None
        self.step: JailedStep | None = None      # the step in its jail: its exit, and its pids as this machine's

    def spawn(self, argv: list[str], cwd: str, env: dict) -> None:
        child_fds = [self.ev_w, self.rep_r, self.stacks_fd] + ([self.pop_w] if self.pop_w is not None else [])
        env = {**env, MARKER: self.marker, FDS_ENV: ",".join(map(str, child_fds)), DUMP_FD_ENV: str(self.dump_r)}
        child_fds.append(self.dump_r)
        if self.jail is not None:
            self.box, argv, env = jailed(argv, env, self.jail)
            child_fds.append(self.box.write_fd)
        try:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True, pass_fds=tuple(child_fds))
        finally:
            for fd in child_fds:
                os.close(fd)
        proc = self.proc
        self.popcorn = Tail(os.fdopen(self.pop_r, "rb"), cap=REPORT_CAP) if self.pop_r is not None else None
        self.res.pid = proc.pid
        self.out, self.err = Tail(proc.stdout), Tail(proc.stderr)
        self.parser = EventParser(worker_pid=proc.pid)     # until the jail says the step's number inside
        self.tree = ProcessTree(psutil.Process(proc.pid), self.marker)
        if self.box is not None:
            self.step = JailedStep(proc, self.box, self.tree, self.parser)
        if self.arbiter:
            self.arbiter.register(self.owner,
                                  lambda on: self.tree.signal(proc.pid, signal.SIGSTOP if on else signal.SIGCONT))

    # -- while it runs ---------------------------------------------------------------------------------
    def _grant(self, lock_id: int) -> None:
        try:
            os.write(self.rep_w, f"{lock_id}\n".encode())
        except OSError:
            pass

    def _handle(self, ev: dict) -> None:
        if ev["k"] == "outlive":
            self.tree.adopt([[self.host_of(int(p[0])), p[1]] for p in ev["procs"]
                             if isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], int)])
        elif ev["k"] == "lock":
            if self.arbiter is None:
                self.parser.anomaly("a timing-section request, though this run was offered no arbitration")
            elif ev["op"] == "acquire":
                self.arbiter.acquire(self.owner, lambda i=ev["id"]: self._grant(i))
            else:
                self.arbiter.release(self.owner)
        elif self.on_event:
            self.on_event(ev)

    def poll(self) -> int | None:
        return self.step.poll() if self.step else self.proc.poll()

    def host_of(self, inner: int) -> int | None:
        return self.step.host_of(inner) if self.step else inner

    def drain(self, block_s: float) -> None:
        if self.step:
            self.step.status()
        try:
            ready, _, _ = select.select([self.ev_r], [], [], block_s)
        except (OSError, ValueError):
            return
        while ready:
            try:
                chunk = os.read(self.ev_r, 1 << 16)
            except OSError:        # BlockingIOError included: nothing more for now
                return
            if not chunk:
                return
            for ev in self.parser.feed(chunk):
                self._handle(ev)

    def _look(self, now: float) -> str | None:
        """One look at the process tree (its processes, their memory) and at the limits: why to stop, if any."""
        res, tree = self.res, self.tree
        tree.scan()
        res.max_procs = max(res.max_procs, len(tree.procs))
        res.peak_rss_mb = max(res.peak_rss_mb, tree.measure())
        held = self.arbiter.held_up(self.owner, now) if self.arbiter else 0.0
        return deadline_reason(res, now, held, self.limits, self.stop)

    def watch_until_end(self, others) -> None:
        """Poll until the process exits or a limit says stop (then its stacks are asked for)."""
        last_poll = 0.0
        while self.poll() is None:
            self.drain(POLL_S / 2)
            now = time.time()
            if now - last_poll < POLL_S:
                continue
            last_poll = now
            self.loads.append(os.getloadavg()[0] / self.cpus)
            if others is not None:
                self.overlapped |= set(others())
            reason = self._look(now)
            if reason:
                self.res.killed, self.res.kill_t = reason, now
                self._dump_stacks()
                return
        # The harness's subprocess.run waits for the process to exit AND for its stdout and stderr to
        # close: a child that inherited them (a forgotten monitor) keeps the step open to its deadline.
        exited = time.time()
        while (self.out.is_alive() or self.err.is_alive()) and not self.res.killed:
            self.drain(POLL_S / 2)
            now = time.time()
            reason = self._look(now)
            if reason:
                self.res.killed, self.res.kill_t = reason, now
                self.res.exited_s = round(exited - self.res.start_t, 4)
                step = self.step.pid() if self.step else self.proc.pid
                self.res.held_by = [describe_process(p) for p in self.tree.alive(work_only=True)
                                    if p.pid not in (self.proc.pid, step)][:5]

    def _dump_stacks(self) -> None:
        """Every thread's stack from the worker, and from the processes the evaluator spawned (stacks.py)."""
        step = self.step.view() if self.step else self.proc
        translate = self.step.jailed if self.step else False
        self.res.kernel_waits = dump_stacks(self.parser.events, self.parser.worker_pid, step, self.host_of,
                                            translate, self.stacks_rd, self.dump_w)

    # -- its end ---------------------------------------------------------------------------------------
    def end(self, linger: bool) -> int:
        """The process ended, or killed; what it started killed too, unless it lingers. Returns its exit status."""
        self.tree.measure()
        if self.arbiter:      # before the kill: a section this child held ends, and its pauses close, now
            self.arbiter.forget(self.owner)
        if linger and self.res.killed not in ("max_rss", "interrupted"):
            # As in the harness's container: the step's own process ends (the harness kills only it), what it
            # started lives on until the run's container ends (StageRunner kills it then)
            own = self.step.live_pid() if self.step else self.proc.pid     # jailed: never outer, whose end is init's
            with contextlib.suppress(OSError, TypeError):
                os.kill(own, signal.SIGKILL)
            self.res.lingering = self.tree
            return self.step.wait() if self.step else self.proc.wait()
        self.res.survivors = self.tree.kill_all(self.proc.pid)
        self.proc.wait()
        return self.step.wait() if self.step else self.proc.returncode

    def close_lock(self) -> None:
        if self.arbiter:
            self.arbiter.forget(self.owner)
        os.close(self.rep_w)

    def collect(self, rc: int) -> ChildResult:
        """The record: exit, output tails, CPU and load, events, lock waits, stacks."""
        res, tree = self.res, self.tree
        res.wall_s = (res.kill_t or time.time()) - res.start_t
        self.drain(0)
        os.close(self.ev_r)
        self.out.join(2.0)
        self.err.join(2.0)
        if self.popcorn:
            self.popcorn.join(2.0)
            res.report = self.popcorn.text()
        res.exit_code, res.signal = (rc, None) if rc >= 0 else (None, signame(-rc))
        res.pid = self.step.pid() if self.step else self.proc.pid
        res.max_procs = max(0, res.max_procs - len(self.tree.infra))
        if self.step is not None:
            self.step.status()
            box = self.box
            res.jail = {"walls": box.walls, "refused": box.refused, "error": box.error, "signals": box.signals}
        res.cpu_s = sum(u + s for u, s in tree.cpu.values())
        res.user_s = sum(u for u, _ in tree.cpu.values())
        res.run_delay_s = round(sum(tree.delay.values()), 3)
        res.load_per_cpu = round(sum(self.loads) / len(self.loads) if self.loads
                                 else os.getloadavg()[0] / self.cpus, 3)
        host1 = host_cpu_s()
        if self.host0 is not None and host1 is not None:
            # what the rest of the host (other runs, other programs) kept the CPUs busy with meanwhile: a
            # measure that CPU hogs cannot escape, unlike the load average, which lags by a minute
            res.others_cpu_s = round(max(0.0, host1 - self.host0 - res.cpu_s), 3)
        res.overlapped = sorted(self.overlapped)
        res.stdout_tail, res.stderr_tail = self.out.text(), self.err.text()
        res.stdout_bytes, res.stderr_bytes = self.out.total, self.err.total
        res.events, res.anomalies = self.parser.events, self.parser.anomalies
        if self.arbiter:
            self._lock_waits()
        res.stacks = tail_of(self.stacks_rd, 64 * 1024)
        os.close(self.stacks_rd)
        os.close(self.dump_w)
        res.stacks += spawned_stacks(self.spawned_stacks)
        if not res.stacks.strip() and res.kernel_waits:
            res.stacks = ("(the process wrote no Python stacks when asked; the kernel says:)\n" + res.kernel_waits)
        return res

    def _lock_waits(self) -> None:
        # Only within the run's measured wall time: after a deadline the process lives on while its stacks
        # are dumped, and a pause then must not be taken off the time it was charged.
        res = self.res
        end = res.start_t + res.wall_s
        ivs = [(max(a, res.start_t), min(b, end), k) for a, b, k in self.arbiter.intervals(self.owner)
               if min(b, end) - max(a, res.start_t) > 0.005]
        res.lock_waits = [{"start_s": round(a - res.start_t, 4), "seconds": round(b - a, 4), "mode": k}
                          for a, b, k in ivs]
        res.held_up = [(a, b) for a, b, k in ivs if k != "overrun"]


def python_argv(spec_path: str) -> list[str]:
    return [sys.executable, "-m", "diagnose.runs.worker", spec_path]


