"""What one child process did, as the runner records it, and the pieces that watch it: its output drained
into capped tails, the limits that stop it, and how a process is named in a report.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import psutil

TAIL_BYTES = 32 * 1024


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
    exited_s: float | None = None      # the process had exited this long after its start, but its stdout or
    held_by: list[str] = field(default_factory=list)   # stderr stayed open: held by these processes
    lingering: object = None           # linger=True: the ProcessTree whose processes outlived the step
    jail: dict | None = None           # what the run's jail said: its walls, a refusal, signals sent to init


def deadline_reason(res: ChildResult, now: float, held_up: float, limits: "Limits", stop) -> str | None:
    if now - res.start_t - held_up > limits.budget_s:
        return "deadline"
    if limits.max_rss_mb and res.peak_rss_mb > limits.max_rss_mb:
        return "max_rss"
    if stop is not None and stop.is_set():
        return "interrupted"
    return None


def describe_process(p: psutil.Process) -> str:
    try:
        return f"pid {p.pid}: {' '.join(p.cmdline())[:200] or p.name()}"
    except psutil.Error:
        return f"pid {p.pid}"


class Tail(threading.Thread):
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


@dataclass
class Limits:
    budget_s: float
    max_rss_mb: float | None = None
