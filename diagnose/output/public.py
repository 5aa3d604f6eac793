"""What makes a report fit for a public ticket: no path of this machine in it, and no thread of the tool's own
in the stacks it shows.

Text that came from a run names this machine's places: the run's container (a temporary directory), the
Python installation, the user's home and temporary directory. A report shows each as a placeholder
(`<container>/…`, `<python>/…`, `~/…`, `$TMPDIR/…`) and the submission by the path it was given as. The
places come from what the session recorded (the container events' real home and read-only Python
prefixes, the environment variables the container replaced, harness.container.places {root, python, home,
tmpdir} where the CLI records them), and, for a session that lacks them, from the shape of a container's
directory and this interpreter's own prefixes. session.json keeps the raw text.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator

from diagnose.session import Session

CONTAINER, PYTHON, HOME, TMPDIR = "<container>", "<python>", "~", "$TMPDIR"
# System places: naming them says nothing about this machine, and a prefix this short would rename
# unrelated paths (/usr/local/cuda is no Python's)
_SYSTEM = {"", "/", "/usr", "/usr/local", "/opt", "/home", "/tmp", "/var", "/var/tmp", "/dev", "/dev/shm"}
# The runner's temporary directory (diagnose-<pid>-<mkdtemp suffix>) and a run's directory in it
_BOX_TAIL = r"/diagnose-\d+-[a-z0-9_]+(?:/[\w-]+)?"
_ANY_DIRS = r"(?:/[^\s\"'`<>|/]+)*"
# Where a path's name ends when it stands in prose; the code span that then holds it ends there too
_REST = r"[^\s`|<>\"'()\[\],;]*"


def _container_events(s: Session) -> Iterator[dict]:
    walls = (s.harness.get("container") or {}).get("walls")
    for rec in (walls, s.harness.get("isolation")):
        if isinstance(rec, dict):
            yield rec
    for r in s.runs:
        for st in r.stages:
            for step in (st.compile_step, st):
                if step is None:
                    continue
                yield from (e for e in step.events if e.get("k") == "container")


def _variants(paths) -> set[str]:
    """Each path as recorded and as the file system resolves it: a stack names whichever Python opened."""
    out = set()
    for p in paths:
        if not isinstance(p, str) or not p.startswith("/"):
            continue
        p = p.rstrip("/") or "/"
        out.add(p)
        try:
            out.add(os.path.realpath(p))
        except (OSError, ValueError):
            pass
    return {p for p in out if p not in _SYSTEM}


def places(s: Session) -> list[tuple[str, str]]:
    """(this machine's directory, how a report shows it), longest first, so that a Python installed under
    the home directory reads `<python>/…`, not `~/…`."""
    box = s.harness.get("container") or {}
    env, mine = (box.get("env") or {}).get("replaced") or {}, box.get("places") or {}
    events = list(_container_events(s))
    lent = [e.get("read_only") for e in events] + [mine.get("python")]   # the isolation record counts them
    python = [p for x in lent if isinstance(x, list) for p in x] + [sys.prefix, sys.base_prefix, sys.exec_prefix]
    homes = [env.get("HOME"), mine.get("home"), os.environ.get("HOME"), os.path.expanduser("~")] + \
        [e.get("home") for e in events]
    tmps = [env.get(k) for k in ("TMPDIR", "TMP", "TEMP")] + [mine.get("tmpdir"), os.environ.get("TMPDIR"),
                                                               tempfile.gettempdir()]
    shown: dict[str, str] = {}
    for group, label in ((tmps, TMPDIR), (homes, HOME), (python, PYTHON)):    # the later label wins a tie
        shown.update(dict.fromkeys(_variants(group), label))
    return sorted(shown.items(), key=lambda kv: (-len(kv[0]), kv[0]))


def _pattern(s: Session) -> tuple[re.Pattern, list[str]]:
    prefixes = places(s)
    tmps = sorted({p for p, label in prefixes if label == TMPDIR} | {"/tmp"}, key=lambda p: (-len(p), p))
    root = ((s.harness.get("container") or {}).get("places") or {}).get("root")
    known = [re.escape(root.rstrip("/")) + r"(?:/[\w-]+)?"] if isinstance(root, str) and root.strip("/") else []
    # a container's path whose head a message cut off (`…mp/diagnose-4048-…/r0/work/submission.py`) is one too
    box = "(?:" + "|".join(known + [re.escape(t) + _BOX_TAIL for t in tmps] + [_ANY_DIRS + _BOX_TAIL] +
                           [r"[\w.-]+" + _ANY_DIRS + _BOX_TAIL]) + ")"
    alts = [rf"(?P<sub>{box}/work/submission\.py)", f"(?P<box>{box})"]
    alts += [f"(?P<p{i}>{re.escape(p)})" for i, (p, _) in enumerate(prefixes)]
    # another machine's Python, which the session did not record (an older session): by its shape
    alts += [r"(?P<gpy>/[^\s\"'`<>|]*?(?=/lib/python\d\.\d+/(?:site|dist)-packages/))",
             r"(?P<gvenv>/[^\s\"'`<>|]*?/\.?venv(?=/bin/))"]
    # a name ends where no letter follows, nor a dot that goes on with one (a full stop may follow)
    # ... and starts where nothing of a name stands before it, or after a compiler's -L/-I/-R flag (`-L/opt/...`)
    rx = re.compile(r"(?:(?<![\w.~/$-])|(?<=\s-[LIR]))(?:" + "|".join(alts) + r")(?![\w-]|\.[\w-])(?P<rest>" + _REST
                    + ")")
    return rx, [label for _, label in prefixes]


def scrubber(s: Session) -> Callable[[str, Callable[[str], str] | None], str]:
    """A function of (text, wrap): the text with every place of this machine's shown as a report shows it.
    `wrap`, for prose, gets each renamed path whole (a code span keeps `<container>` from reading as HTML)."""
    rx, labels = _pattern(s)
    sub_path = str(s.submission.get("path") or "submission.py")

    def shown(m: re.Match) -> str:
        if m["sub"] is not None:
            return sub_path
        if m["box"] is not None:
            return CONTAINER
        if m["gpy"] is not None or m["gvenv"] is not None:
            return PYTHON
        return labels[next(int(k[1:]) for k, v in m.groupdict().items() if k.startswith("p") and v is not None)]

    def scrub(text: str, wrap: Callable[[str], str] | None = None) -> str:
        if not text:
            return text

        def one(m: re.Match) -> str:
            rest = m["rest"]
            if wrap is None:
                return shown(m) + rest
            tail = len(rest) - len(rest.rstrip(".:"))      # a sentence's full stop is not the path's
            return wrap(shown(m) + rest[:len(rest) - tail]) + rest[len(rest) - tail:]
        return rx.sub(one, text)
    sub_path = scrub(sub_path)       # a path given outside the working directory: under a home, say
    return scrub


# -- stacks: the submission's threads, not the tool's -------------------------------------------------------

_THREAD = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-fA-F]+\b.*:\s*$")
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]*)", line \d+')
_TOOL_THREADS = "diagnose/runs/worker/"


def _tools(block: list[str]) -> bool:
    """A thread the worker started (its watchdog, sampler, metrics poller): the first frame past threading's
    own bootstrap is the worker's. The main thread starts in runpy, and a thread the submission (or a
    library it called) started runs their code there."""
    files = [m["file"].replace("\\", "/") for m in map(_FRAME.match, block) if m]
    started = next((f for f in reversed(files) if not f.endswith("/threading.py")), None)
    return started is not None and _TOOL_THREADS in started and files[-1].endswith("/threading.py")


def submission_threads(stacks: str) -> tuple[str, int]:
    """A faulthandler dump with the tool's own threads left out, and how many were."""
    lines, out, dropped, i = stacks.splitlines(), [], 0, 0
    while i < len(lines):
        if not _THREAD.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].startswith(" "):
            j += 1
        if _tools(lines[i:j]):
            dropped += 1
            j += j < len(lines) and not lines[j].strip()      # and the blank line that ends its block
        else:
            out += lines[i:j]
        i = j
    return "\n".join(out), dropped
