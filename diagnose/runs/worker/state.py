"""What this process reads and writes that can outlive it, from Python's audit hooks.

State kept on disk between processes decides outcomes: a `load_inline` build the compile step made, a
tuning plan a killed stage left, a lock file of a killed build. The parent sees what each step wrote by
snapshotting the container between steps; this hook adds what it cannot see: which files a process read
(so a later step's use of an earlier step's state is evidence), writes outside the container (state that
would leak to this machine), and the processes it started (a compiler, a build tool).

Each (operation, path) is sent once per process, and at most CAP of them, so a cache of ten thousand
files costs ten thousand set lookups, not ten thousand events. The hook never raises and never recurses.
"""
from __future__ import annotations

import os
import signal
import sys
import threading

from diagnose.runs.worker.container import under

CAP = 400
OUTSIDE_CAP = 50
SPAWN_CAP = 50
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_IGNORED_OUTSIDE = ("/proc/", "/sys/", "/dev/")
# System places every process reads (libraries, configuration, the CUDA installation): lent, never state
SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/run", "/snap", "/nix")
_EVENTS = {"open", "os.mkdir", "os.rename", "os.remove", "subprocess.Popen", "os.posix_spawn", "os.system",
           "os.kill", "os.killpg", "socket.connect"}
REACH_CAP = 20
# Reaching beyond the run: a signal to its parent (the harness's process: init in the run's jail), to a process
# group, or to every process; a connection anywhere. A pool's own workers are signalled as the pool ends: not that.


class StateLog:
    def __init__(self, ch, root: str, walls: dict, lent: list[str]):
        self.ch = ch
        self.root = os.path.normpath(root) + os.sep
        self.tool = self.root + ".diagnose"
        private = walls.get("private") or []
        # with a private /tmp, /dev/shm, /var/tmp or home, the absolute path lands in the container's own area
        self.mapped = [(os.path.normpath(p) + os.sep, area + os.sep)
                       for p, area in (("/tmp", "tmp"), ("/dev/shm", "shm"), ("/var/tmp", "vartmp"),
                                       (walls.get("home"), "home")) if p and p in private]
        # what this machine lends every run: reading it is how programs run, not state. Anything else read
        # outside the container is this machine's state, and a run that depends on it proves nothing there.
        self.lent = tuple(os.path.normpath(p) + os.sep for p in lent if p and p != "/")
        self.outside_reads = 0
        # shared on purpose (DIAGNOSE_SHARE), and what was bound back in place under a private /tmp or home (the
        # Python installation, the tool): this machine's, never the run's
        root = os.path.normpath(root)
        kept = [k for k in walls.get("kept") or [] if not (under(root, k) or under(k, root))]
        self.shared = tuple(os.path.normpath(p) + os.sep for p in [*(walls.get("shared") or []), *kept])
        self.seen: set[tuple[str, str]] = set()
        self.spawned = 0
        self.cut = 0               # paths past the cap
        self._busy = threading.local()

    def install(self) -> None:
        sys.addaudithook(self._hook)

    def where(self, path) -> tuple[str, bool] | None:
        """(path relative to the container, True) for a container path; (absolute path, False) outside."""
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            path = os.fspath(path) if hasattr(path, "__fspath__") else None
            if not isinstance(path, str):
                return None          # a descriptor: its path was seen when it was opened
        full = os.path.normpath(os.path.join(os.getcwd(), path))
        if full.startswith(self.tool):
            return None               # the tool's own files: not the submission's state
        if full.startswith(self.root):
            return full[len(self.root):], True
        if (full + os.sep).startswith(self.shared):
            return full, False
        for prefix, area in self.mapped:
            if full.startswith(prefix):
                return area + full[len(prefix):], True
        return full, False

    def _caller(self) -> dict:
        """The innermost frame in the container's working directory (the submission's code) that led here."""
        f = sys._getframe(2)
        work = self.root + "work" + os.sep
        while f is not None:
            if f.f_code.co_filename.startswith(work):
                return {"file": f.f_code.co_filename, "line": f.f_lineno}
            f = f.f_back
        return {}

    def _hook(self, event: str, args) -> None:
        if event not in _EVENTS or getattr(self._busy, "on", False):
            return
        self._busy.on = True
        try:
            self._record(event, args)
        except Exception:  # noqa: BLE001 - an audit hook that raises would break the submission's call
            pass
        finally:
            self._busy.on = False

    def _reach(self, event: str, args) -> None:
        if event == "socket.connect":
            what = f"connect to {args[1]!r}"[:200]
        else:
            target, sig = int(args[0]), int(args[1])
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            if event == "os.killpg":
                what = f"{name} to process group {target}"
            elif target <= 0 or target == 1 or target == os.getppid():
                what = f"{name} to {'its parent (the harness)' if target in (1, os.getppid()) else f'pid {target}'}"
            else:
                return
        if ("reach", what) in self.seen or sum(1 for op, _ in self.seen if op == "reach") >= REACH_CAP:
            return
        self.seen.add(("reach", what))
        self.ch.emit("state", op="reach", path=what, inside=False, **self._caller())

    def _record(self, event: str, args) -> None:
        if event in ("os.kill", "os.killpg", "socket.connect"):
            return self._reach(event, args)
        if event in ("subprocess.Popen", "os.posix_spawn", "os.system"):
            if self.spawned < SPAWN_CAP:
                self.spawned += 1
                argv = args[1] if event != "os.system" and len(args) > 1 else args[0]
                words = [os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in
                         (argv if isinstance(argv, (list, tuple)) else [argv])]
                self.ch.emit("state", op="spawn", argv=" ".join(words)[:300], **self._caller())
            return
        if event == "open":
            path, mode, flags = (list(args) + [None, None, 0])[:3]
            write = bool((flags or 0) & _WRITE_FLAGS) or (isinstance(mode, str) and any(c in mode for c in "wax+"))
            op = "write" if write else "read"
        else:
            op, path = {"os.mkdir": "mkdir", "os.rename": "rename", "os.remove": "remove"}[event], args[0]
            if event == "os.rename":
                path = args[1]        # where it now is
        place = self.where(path)
        if place is None:
            return
        rel, inside = place
        if not inside and (rel.startswith(_IGNORED_OUTSIDE) or op == "read" and (rel + os.sep).startswith(self.lent)):
            return                    # reading what the machine lends every run is how programs run
        if not inside and op == "read":
            if self.outside_reads >= OUTSIDE_CAP or ("read", rel) in self.seen:
                return
            self.outside_reads += 1
            self.seen.add(("read", rel))
            # one that is not there in the run (its walls hide it, or it exists nowhere): an attempt, which the
            # parent keeps where this machine has that file (runner/stage_facts.py)
            missing = {} if os.path.isfile(rel) else {"missing": True}
            self.ch.emit("state", op="read", path=rel, inside=False, **missing, **self._caller())
            return
        if op == "read" and not os.path.isfile(os.path.join(self.root, rel)):
            return                    # a probe for a file that is not there (an import looking): nothing kept
        key = (op, rel)
        if key in self.seen:
            return
        if len(self.seen) >= CAP:
            if not self.cut:
                self.ch.emit("state", op="cut", path="", inside=True)   # more than CAP: the rest is not recorded
            self.cut += 1
            return
        self.seen.add(key)
        self.ch.emit("state", op=op, path=rel, inside=inside)
