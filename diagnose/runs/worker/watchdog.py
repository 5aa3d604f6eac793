"""The child's own guards, for when the parent cannot act: its deadline, its parent's death, and a
stopped parent.

- PR_SET_PDEATHSIG: the kernel kills this process when the parent dies.
- A thread checks four times a second: if the parent died (re-parenting changed getppid) it removes the
  run's temporary directory and kills this process group; if the parent was stopped (SIGSTOP, as a
  submission can do to it) it resumes it; past the budget plus a grace, counting only the time this
  process did not spend waiting for the GPU, it dumps every stack and kills the group itself.
- At its deadline the parent asks for every stack through the dump pipe; this thread reads it between
  naps and has faulthandler write them. That needs the GIL, which a main thread waiting in C (a CUDA
  synchronize) has released; a signal to a CUDA process was seen to write nothing there.
- The parent's SIGUSR1 (its second way to ask, for a main thread that holds the GIL) is delivered to
  this thread: the main thread blocks it (`route_stack_signal`), and so do the threads the submission
  starts, which inherit that mask. A main thread blocked in a CUDA wait inside the driver would otherwise leave
  the signal
  pending forever. No dump is taken before the deadline: faulthandler reads other threads' frames
  while they run, and a dump taken while the run still had a chance could crash a healthy run.
"""
from __future__ import annotations

import ctypes
import faulthandler
import os
import select
import shutil
import signal
import threading
import time

HARD_GRACE_S = 10.0


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


class Watchdog(threading.Thread):
    def __init__(self, budget_s: float | None, stacks, root: str | None, dump_fd: int | None = None):
        super().__init__(daemon=True, name="diagnose-watchdog")
        self.budget_s, self.stacks, self.root, self.dump_fd = budget_s, stacks, root, dump_fd
        self._dump_id = self._identity(dump_fd)
        self.start_t = time.time()
        self.waited_s = 0.0
        self.ppid = os.getppid()
        _die_with_parent()

    def add_wait(self, seconds: float) -> None:
        self.waited_s += seconds

    @staticmethod
    def route_stack_signal() -> None:
        """Call from the main thread once this thread runs: SIGUSR1 then reaches this thread only."""
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})

    def run(self) -> None:
        last = time.monotonic()
        while True:
            self._nap(0.25)
            now = time.monotonic()
            if now - last > 1.0:     # this process was stopped (paused for another run's timing): not ours
                self.waited_s += now - last - 0.25
            last = now
            if os.getppid() != self.ppid:
                if self.root:
                    shutil.rmtree(self.root, ignore_errors=True)
                self._kill_group()
            self.resume_parent()
            if self.budget_s and time.time() - self.start_t - self.waited_s > self.budget_s + HARD_GRACE_S:
                try:
                    faulthandler.dump_traceback(file=self.stacks, all_threads=True)
                finally:
                    self._kill_group()

    def _nap(self, seconds: float) -> None:
        """Sleep, or wake to a dump request from the parent and answer it."""
        if self.dump_fd is not None and self._identity(self.dump_fd) != self._dump_id:
            self.dump_fd = None              # closed by the submission, or its number reused for another file
        if self.dump_fd is None:
            time.sleep(seconds)
            return
        try:
            ready, _, _ = select.select([self.dump_fd], [], [], seconds)
            if ready and os.read(self.dump_fd, 64):
                faulthandler.dump_traceback(file=self.stacks, all_threads=True)
            elif ready:             # the parent closed its end: nothing more will be asked
                self.dump_fd = None
        except (OSError, ValueError):
            self.dump_fd = None

    @staticmethod
    def _identity(fd: int | None) -> tuple | None:
        try:
            st = os.fstat(fd) if fd is not None else None
        except OSError:
            return None
        return (st.st_dev, st.st_ino) if st else None

    def resume_parent(self) -> None:
        """A submission can SIGSTOP the tool; this process, the last of it to run, continues it."""
        if _stopped(self.ppid):
            try:
                os.kill(self.ppid, signal.SIGCONT)
            except OSError:
                pass

    @staticmethod
    def _kill_group() -> None:
        try:
            os.killpg(0, signal.SIGKILL)
        finally:
            os._exit(137)
