"""Whether work ran between two clock reads of one thread (watch.py asks it): a frame that reads one line's clock
again and again is a wait only when nothing of the submission's ran between the reads. A timing loop that runs a
candidate for a fixed time (`while perf_counter() - t0 < s: fn()`, the way do_bench itself works) reads one line
over and over too, with the candidate between.

Work is a call made by the submission's code (its own function, a library's, a builtin: `fn()`, `torch.mm(a, b)`,
`kernel[grid](x)`) or a call of the submission's own code from anywhere (a candidate a library timer calls); the
clock reads themselves and time's own functions (`time.sleep`, the way a polling wait is written) are not.

Seen through a profile function on the reading thread, set at a read only while its frame is still undecided
(no wait yet, no work seen) and removed at the thread's next read or at the first call that is work, so a
candidate runs unwatched once it has started. A profile function already set (another probe's) still gets every
event.
"""
from __future__ import annotations

import sys
import threading


class Between:
    def __init__(self, api, clock_code):
        self.api = api                        # its submission_dir: where the submission's frames' files lie
        self.clock_code = clock_code          # the code of the hook's clock wrappers: a read, never work
        self.local = threading.local()        # .worked (None: not watching), .old (the profile function under ours)
        self.profile = self._profile          # one bound method, so that sys.getprofile() is it

    def watch(self) -> None:
        """Watch this thread until its next read (stop) or the first work it does."""
        old = sys.getprofile()
        if old is self.profile:
            return
        self.local.worked, self.local.old = False, old
        sys.setprofile(self.profile)

    def stop(self) -> bool | None:
        """Whether work ran on this thread since watch(); None where it was not watched."""
        worked = getattr(self.local, "worked", None)
        self.local.worked = None
        if sys.getprofile() is self.profile:
            sys.setprofile(self.local.old)
        return worked

    def _work(self, frame, event: str, arg) -> bool:
        mine = self.api.submission_dir
        if event == "call":
            code = frame.f_code
            if code is self.clock_code:
                return False
            caller = frame.f_back
            return code.co_filename.startswith(mine) or \
                caller is not None and caller.f_code.co_filename.startswith(mine)
        return event == "c_call" and frame.f_code.co_filename.startswith(mine) and \
            getattr(arg, "__module__", None) != "time"

    def _profile(self, frame, event, arg):
        old = getattr(self.local, "old", None)
        if self._work(frame, event, arg):
            self.local.worked = True
            sys.setprofile(old)           # decided: the candidate runs at full speed
        if old is not None:
            old(frame, event, arg)
