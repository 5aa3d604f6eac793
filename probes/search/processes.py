"""Candidates timed in other processes belong to the search that waits for them: a ProcessPoolExecutor's or a
multiprocessing Pool's workers (spawned or forked), one candidate each, time it there, and hand back a number the
waiting caller compares. Alone no frame of a worker's holds three candidates, and the caller's process never sees
its clock reads; the caller's frames, waiting for the results, do hold them all (as threads.py's workers').

So a process the hook's process starts while an armed phase is open or from the submission's code (its frames on
the starting thread) inherits a pipe, and its clock reads of the submission's code are sent there instead of kept
(Upstream): the submission's frames of the read, below the process's own start, each with a serial that stays its
own while that call lives, and the plain values they held. The starting process reads the pipe on a thread of its
own (Bridge) and hands each read to its Search as another thread's (Remote frames standing in for the worker's), so
it is counted under the frames of the phase's thread that wait for it. A forked worker inherits the hook itself; a
spawned one runs spawned.py first (on its command line, as the evaluator's bootstrap is added), with the pipe's
descriptor passed along. A worker's own workers write to the same pipe.
"""
from __future__ import annotations

import json
import os
import select
import sys
import threading

from probes.search.threads import submission_frames
from probes.search.watch import frame_texts

MARK = "probes.search.spawned"       # in a spawned worker's command line: it writes to the pipe
PIPE_BUF = 4096                      # one write of at most this many bytes is never interleaved with another's
_BRIDGE: list = []                   # this process's bridge (its patches are made once)


class Code:
    __slots__ = ("co_filename", "co_firstlineno", "co_name")

    def __init__(self, name: str, file: str, first: int):
        self.co_name, self.co_filename, self.co_firstlineno = name, file, first


class Remote:
    """A worker's frame as its process sent it: what Search reads of a frame."""
    __slots__ = ("f_back", "f_code", "f_lineno", "texts")

    def __init__(self, code: Code):
        self.f_code, self.f_back, self.f_lineno, self.texts = code, None, 0, {}


class Upstream:
    """In a process the hook's process started: each clock read of the submission's code, sent up the pipe. It
    stands where the hook's Search stands (hook.search), with the same read()."""

    def __init__(self, wfd: int, root: str, inherited=()):
        self.wfd, self.root = wfd, root
        self.inherited = set(inherited)    # a forked worker's copies of its parent's frames: the parent's own
        self.last: dict[int, tuple] = {}   # id(frame) -> (frame, serial): the last read's chain, held
        self.serial = 0

    def read(self, kind: str, weight: float, first, thread: int, worked: bool | None = None) -> bool:
        chain = submission_frames(first, self.root, self.inherited)
        if not chain or self.wfd is None:
            return False
        now, frames = {}, []
        for fr in chain:
            got = self.last.get(id(fr))
            if got is None or got[0] is not fr:
                self.serial += 1
                got = (fr, self.serial)
            now[id(fr)] = got
            c = fr.f_code
            frames.append([got[1], c.co_name, c.co_filename, c.co_firstlineno, fr.f_lineno, frame_texts(fr)])
        self.last = now
        msg = {"pid": os.getpid(), "thread": thread, "kind": kind, "weight": weight, "worked": worked,
               "chain": frames}
        line = json.dumps(msg)
        for fr in frames:           # one write under PIPE_BUF: the values go first, the deepest frame's last
            if len(line) < PIPE_BUF:
                break
            fr[5] = {}
            line = json.dumps(msg)
        try:
            if len(line) < PIPE_BUF:        # else a chain too deep to send: one candidate less, never a torn one
                os.write(self.wfd, (line + "\n").encode())
        except OSError:
            self.wfd = None         # the starting process is gone, or closed the pipe: nobody to tell
        return True


class Bridge:
    """This process's end: the pipe its workers write their reads to, read on a thread of its own into the hook."""

    def __init__(self, hook, wfd: int | None = None):
        self.hook, self.wfd, self.rfd = hook, wfd, None
        self.lock = threading.Lock()
        self.buf = b""
        self.frames: dict[tuple, Remote] = {}      # (pid, thread, serial) -> its Remote, while its call lives
        self.forking: int | None = None
        self.thread: threading.Thread | None = None

    # -- starting a worker -------------------------------------------------------------------------------------
    def theirs(self) -> bool:
        """The process now starting is the submission's: an armed phase is open, or its code starts it."""
        search = self.hook.search
        if search is not None and not isinstance(search, Upstream):
            return True
        root, f = self.hook.api.submission_dir, sys._getframe(1)
        while f is not None and not f.f_code.co_filename.startswith(root):
            f = f.f_back
        return f is not None

    def open(self) -> int:
        if self.wfd is None:
            self.rfd, self.wfd = os.pipe()
            os.set_blocking(self.rfd, False)
        return self.wfd

    def listen(self) -> None:
        if self.rfd is not None and self.thread is None:
            self.thread = threading.Thread(target=self._listen, name="search-processes", daemon=True)
            self.thread.start()

    def _listen(self) -> None:
        while self.rfd is not None:
            try:
                select.select([self.rfd], [], [])
            except (OSError, ValueError):
                return
            self.drain()

    def drain(self) -> None:
        """Hand every read the workers have written so far to the hook (at a phase's end too: a worker's last read
        is in the pipe before its result reaches the caller)."""
        if self.rfd is None:
            return
        with self.lock:
            while True:
                try:
                    got = os.read(self.rfd, 65536)
                except BlockingIOError:
                    break
                except OSError:
                    return
                if not got:
                    break
                self.buf += got
            *lines, self.buf = self.buf.split(b"\n")
            for line in lines:
                try:
                    msg = json.loads(line)
                    self.hook.remote(self.chain(msg), msg)
                except Exception:  # noqa: BLE001 - a read the probe cannot take is one candidate less, no more
                    continue

    def chain(self, msg: dict) -> list:
        """The Remote frames of a read: each call that lives on keeps its Remote (the Search knows a call by its
        frame); the others of that worker's thread are let go."""
        key, out = (msg["pid"], msg["thread"]), []
        for serial, name, file, first, line, texts in msg["chain"]:
            fr = self.frames.get((*key, serial))
            if fr is None:
                fr = self.frames[(*key, serial)] = Remote(Code(name, file, first))
            fr.f_lineno, fr.texts = line, texts
            out.append(fr)
        live = {(*key, s[0]) for s in msg["chain"]}
        for k in [k for k in self.frames if (k[0], k[1]) == key and k not in live]:
            del self.frames[k]
        return out

    # -- the patches -------------------------------------------------------------------------------------------
    def patch(self) -> None:
        import multiprocessing.spawn
        import multiprocessing.util
        spawn, util = multiprocessing.spawn, multiprocessing.util
        orig_cmd, orig_passfds = spawn.get_command_line, util.spawnv_passfds
        tool = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

        def get_command_line(**kwds):
            cmd = orig_cmd(**kwds)
            if not self.theirs():
                return cmd
            wfd = self.open()
            self.listen()
            first = (f"import sys; sys.path[:0] = [{tool!r}]; import {MARK}; "
                     f"{MARK}.child({wfd}, {self.hook.api.submission_dir!r}); ")
            return [c.replace("from multiprocessing.spawn import spawn_main",
                              first + "from multiprocessing.spawn import spawn_main", 1)
                    if isinstance(c, str) else c for c in cmd]

        def spawnv_passfds(path, args, passfds):
            if self.wfd is not None and any(isinstance(a, str) and MARK in a for a in args):
                passfds = sorted({*passfds, self.wfd})
            return orig_passfds(path, args, passfds)
        spawn.get_command_line, util.spawnv_passfds = get_command_line, spawnv_passfds
        os.register_at_fork(before=self._before_fork, after_in_parent=self._after_parent,
                            after_in_child=self._after_child)

    def _before_fork(self) -> None:
        self.forking = self.open() if self.theirs() else None

    def _after_parent(self) -> None:
        if self.forking is not None:
            self.listen()
        self.forking = None

    def _after_child(self) -> None:
        """In the forked worker: its reads go up the pipe; the frames it inherited are its parent's."""
        wfd, self.forking = self.forking, None
        if self.rfd is not None:
            os.close(self.rfd)
        self.rfd, self.thread, self.buf, self.frames, self.lock = None, None, b"", {}, threading.Lock()
        inherited, f = [], sys._getframe()
        while f is not None:
            inherited.append(id(f))
            f = f.f_back
        self.hook.forked(Upstream(wfd, self.hook.api.submission_dir, inherited) if wfd is not None else None)


def bridge(hook, wfd: int | None = None) -> Bridge:
    """The process's bridge, now serving `hook` (a later hook of the same process, the evaluator's bootstrap's,
    takes it over with a pipe of its own); patched once."""
    if _BRIDGE:
        b = _BRIDGE[0]
        b.hook, b.wfd, b.rfd = hook, wfd, None
        return b
    b = Bridge(hook, wfd)
    b.patch()
    _BRIDGE.append(b)
    return b
