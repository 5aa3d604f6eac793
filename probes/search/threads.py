"""Candidates timed in other threads belong to the search that waits for them: a ThreadPoolExecutor's workers, one
candidate each, or a thread started and joined, have no frame of the submission's below the one that times, and
alone no frame of theirs holds three candidates. The phase's own thread, waiting for them, does: its submission
frames at the moment a worker reads a clock are the top of that read's chain (watch.Search.read)."""
from __future__ import annotations

import sys

TRANSIENT = ("<listcomp>", "<genexpr>", "<setcomp>", "<dictcomp>")


def waiting_chain(thread: int, root: str) -> list:
    """The submission's frames of `thread` (outermost first), where it stands now: the call that waits for the
    worker that reads a clock. A comprehension it stands in last (submitting the candidates, then collecting their
    results) is left off: the function that holds it waits for them all. [] when that thread is not in the
    submission's code (or has ended)."""
    f, out = sys._current_frames().get(thread), []
    while f is not None:
        if f.f_code.co_filename.startswith(root):
            out.append(f)
        f = f.f_back
    out.reverse()
    while len(out) > 1 and out[-1].f_code.co_name in TRANSIENT:
        out.pop()
    return out


def submission_frames(first, root: str, skip=()) -> list:
    """The frames of the submission's code from `first` up, outermost first (but those in `skip`, by id)."""
    out = []
    while first is not None:
        if first.f_code.co_filename.startswith(root) and id(first) not in skip:
            out.append(first)
        first = first.f_back
    out.reverse()
    return out
