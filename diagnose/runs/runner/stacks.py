"""Where a child was when it was stopped: its Python stacks (faulthandler, on request through a pipe, every
thread), the kernel's wait channels, signal names, and the tails of its streams.
"""

from __future__ import annotations

import ctypes
import glob
import os
import signal
import stat
import subprocess
import time

STACK_GRACE_S = 2.0     # how long a stack dump may take to arrive


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


def signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def tail_of(fd: int, cap: int) -> str:
    """The last `cap` bytes of a regular file, read through a descriptor we hold."""
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, cap, max(0, size - cap)).decode("utf-8", errors="replace")
    except OSError:
        return ""


def ask_for_stacks(proc: subprocess.Popen, stacks_rd: int, dump_w: int, dump_tid: int | None) -> str:
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


def spawned_stacks(stacks_path: str) -> str:
    """The stacks the evaluator's pool workers wrote, each into a file of its own beside ours."""
    out = ""
    for path in sorted(glob.glob(glob.escape(stacks_path) + ".*")):
        try:   # non-blocking, and only a regular file: these paths are in the submission's reach
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            text = tail_of(fd, 32 * 1024) if stat.S_ISREG(os.fstat(fd).st_mode) else ""
        finally:
            os.close(fd)
        if text.strip():
            out += f"\n== process {path.rsplit('.', 1)[-1]} (spawned by the evaluator) ==\n{text}"
    return out


def dump_stacks(events: list[dict], worker_pid: int, step, host_of, jailed: bool, stacks_rd: int,
                dump_w: int) -> str:
    """Every thread's stack from the worker (ask_for_stacks), and SIGUSR1 to each process the evaluator spawned
    (files of their own). Events name processes and threads by their numbers inside the run's jail: `host_of`
    finds this machine's number for a process, boxed.host_tid for a thread. Returns the kernel's word on the
    worker's threads when they wrote no stack."""
    from diagnose.runs.runner.boxed import host_tid
    dump_tid = next((e.get("dump_tid") for e in events if e["k"] == "worker_start" and e["pid"] == worker_pid), None)
    spawned = 0
    for e in events:
        if e["k"] == "worker_start" and e.get("child") and e["pid"] != worker_pid:
            host = host_of(e["pid"])
            try:
                if host:
                    os.kill(host, signal.SIGUSR1)
                    spawned += 1
            except OSError:
                pass
    if isinstance(dump_tid, int) and jailed:
        dump_tid = host_tid(step.pid, dump_tid)
    waits = ask_for_stacks(step, stacks_rd, dump_w, dump_tid if isinstance(dump_tid, int) else None)
    if spawned:
        time.sleep(0.5)     # their files, too, need a moment
    return waits
