"""Where in the submission a stage was: the innermost submission frame of a stack dump, of an exception's
frames or of a traceback's text, with the library paths tidied. Takes text and frames; gives {file, line,
func, code}.
"""

from __future__ import annotations

import os
import re

from diagnose.runs.runner import TOOL_ROOT

_SITE_PACKAGES = re.compile(r'(?<=["\s])/[^"\s]*?/(site-packages|dist-packages)/')


def tidy(text: str) -> str:
    """Shorten installation prefixes in stacks and tracebacks: '…/site-packages/torch/...' and
    '…/diagnose/runs/worker/...' read the same on every machine, and a report attached to a ticket should not
    carry the host's directory layout."""
    return _SITE_PACKAGES.sub(r"…/\1/", text or "").replace(TOOL_ROOT + os.sep, "…/")


def undouble(text: str) -> str:
    """A message whose template was applied twice, shown once. An exception class that formats its message from
    a template ("Autotuning is disabled {0}, please provide ...") and is pickled back from a pool worker is
    built again from its formatted text, so the template wraps itself: "P P x, S, S" becomes "P x, S"."""
    m = text or ""
    n = len(m)
    i = next((k for k in range(n // 3, 7, -1) if m[:k] == m[k:2 * k]), 0)
    j = next((k for k in range(n // 3, 7, -1) if m[n - 2 * k:n - k] == m[n - k:]), 0)
    return m[i:n - j] if i and j and n - i - j > 0 else m


_STACK_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def culprit(frames: list[dict], submission_file: str) -> dict | None:
    """The submission line that matters in a stack (frames outermost first): the last submission frame
    before the stack first leaves the submission for good or for torch. A compiled function's own frame,
    re-entered from inside torch, is not it: the line that called into torch is."""
    mine = [os.path.realpath(f["file"]) == os.path.realpath(submission_file) for f in frames]
    if not any(mine):
        return None
    first = mine.index(True)
    last = first
    while last + 1 < len(frames) and mine[last + 1]:
        last += 1
    f = frames[last]
    innermost = frames[len(mine) - 1 - mine[::-1].index(True)]
    return {"file": f["file"], "line": f["line"], "func": f["func"], "code": f.get("code", ""),
            "innermost_line": innermost["line"]}


_THREAD = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-f]+)")


def _main_thread_frames(stacks: str, submission_file: str) -> list[dict]:
    """Frames (outermost first) of the thread to blame. faulthandler lists threads newest first, so the
    main thread is the last of each dump; the file may hold several dumps (the child's own watchdog and
    the parent's request). The main thread's latest dump wins when it is in the submission; a helper
    thread's frames are used only when the main thread never is."""
    blocks: list[tuple[str, list[dict]]] = []
    for line in stacks.splitlines():
        t = _THREAD.match(line)
        if t:
            blocks.append((t.group(1), []))
            continue
        m = _STACK_FRAME.match(line)
        if m:
            if not blocks:
                blocks.append(("?", []))
            blocks[-1][1].append({"file": m["file"], "line": int(m["line"]), "func": m["func"]})
    if not blocks:
        return []
    base = os.path.realpath(submission_file)
    mine = [(tid, fr) for tid, fr in blocks if any(os.path.realpath(f["file"]) == base for f in fr)]
    main_id = blocks[-1][0]
    ordered = [b for b in mine if b[0] == main_id] or mine
    return list(reversed(ordered[-1][1])) if ordered else []


def stack_site(stacks: str, submission_file: str) -> dict | None:
    return culprit(_main_thread_frames(stacks, submission_file), submission_file)


def frames_site(frames: list[dict], submission_file: str) -> dict | None:
    return culprit(frames or [], submission_file)


_TEXT_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')


def frames_from_text(text: str) -> list[dict]:
    """Frames named in a traceback's text: a pool worker's traceback reaches the evaluator only as text."""
    return [{"file": m["file"], "line": int(m["line"]), "func": m["func"]} for m in _TEXT_FRAME.finditer(text or "")]


def submission_lines(st_stacks: str, frames: list[dict] | None, submission_file: str) -> list[int]:
    """The submission's lines on the failing stack, outermost first: a traceback's frames, else the thread that
    a hang's stack dump blames. Two failures at the same line can still differ here (one helper, two callers)."""
    chain = frames or _main_thread_frames(st_stacks or "", submission_file)
    base = os.path.realpath(submission_file)
    return [f["line"] for f in chain if os.path.realpath(f["file"]) == base]
