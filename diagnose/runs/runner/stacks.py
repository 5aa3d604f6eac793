"""Where a child was when it was stopped: its Python stacks (faulthandler, on request through a pipe, every
thread), the kernel's wait channels, signal names, and the tails of its streams.
"""

from __future__ import annotations

import ctypes
import os
import signal
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
