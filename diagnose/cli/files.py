"""Writing results: atomic (temp file, then rename), so a crash mid-write never leaves a truncated file.
Only the CLI calls this."""
from __future__ import annotations

import fcntl
import itertools
import json
import os
import tempfile
import threading
import time
from pathlib import Path

from diagnose.engine.observer import Observer
from diagnose.errors import BadInput
from diagnose.output import RENDERERS
from diagnose.session import Session

FILES = {"session.json": "json", "report.md": "md", "trace.json": "trace"}


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_all(out: Path, session: Session, cl: list | None = None) -> list[str]:
    """Every file of the session, session.json first, from the claims the engine settled (`cl`; derived again where
    None); each rendered on its own, so that a renderer that raises
    (a bug of ours) costs only its own file and never the runs. Returns what failed, one "file: error" each;
    report.md then holds a short note saying so, and session.json, if even its renderer failed, the raw session
    without the derived claims. An error writing a file (the disk) is raised."""
    failed = []
    for name, fmt in FILES.items():
        try:
            text = RENDERERS[fmt](session, cl=cl)
        except Exception as e:  # noqa: BLE001 - a bug of ours in a renderer: said, and the other files go on
            why = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}".rstrip(": ")
            failed.append(f"{name}: {why}")
            text = _stand_in(name, session, why)
        if text is not None:
            write_atomic(out / name, text)
    return failed


def _stand_in(name: str, session: Session, why: str) -> str | None:
    """What a file whose renderer failed holds instead: the raw runs, or a note that names the failure."""
    if name == "session.json":
        data = session.to_dict()
        data["claims_error"] = f"the claims could not be derived (a bug in diagnose): {why}"
        return json.dumps(data, indent=1, default=str) + "\n"
    if name == "report.md":
        v = session.verdict
        return (f"# diagnose: {session.submission.get('name', '')}: {str(v.status).upper()}\n\n"
                f"- **Verdict:** {str(v.status).upper()} {v.message}\n\n"
                f"The report renderer failed (a bug in diagnose): {why}; session.json holds every run "
                f"(`diagnose report session.json` renders this report again).\n")
    return None


class OutDir:
    """The output directory of one diagnosis, checked before any run starts and held for its whole
    length: a directory (created if missing) that we can write, and that no other diagnose run holds.
    The hold is an advisory lock on the directory itself, so nothing extra is left in it."""

    def __init__(self, path: Path, option: str = "--out"):
        self.path, self.made = path, not path.exists()
        if path.exists() and not path.is_dir():
            raise BadInput(f"{option} {path}: exists and is not a directory")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BadInput(f"{option} {path}: cannot create it: {e.strerror}") from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise BadInput(f"{option} {path}: not writable")
        self._fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise BadInput(f"{option} {path}: another diagnose run is writing there") from None

    def save(self, session: Session) -> list[str]:
        return save_all(self.path, session)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def drop(self) -> None:
        """A command that ended before any report (bad input found late, a run that cannot start): the folder goes,
        where this command made it and nothing was written there."""
        self.close()
        if self.made:
            try:
                self.path.rmdir()
            except OSError:
                pass


SAVE_EVERY_S = 2.0     # a copy in the background at most this often; the final write (`now`) at once


class Saver(Observer):
    """The session's files, written as the engine hands on each change, but off the engine's threads.

    The engine settles the session once per change (engine/conclusions.py) and hands it on holding its lock: a
    copy in plain data and its claims. The saver keeps them and returns, and a thread of its own renders and writes
    the newest copy, at most one every SAVE_EVERY_S. Copies that pile up meanwhile (runs that end together) cost
    one write, not one each: a whole save of a long diagnosis takes about a second, and each used to hold the
    engine's lock and the run's next stage. `now(session, cl)` writes at once and returns when the files are on disk
    (the final write); an older copy still on its way is then dropped, never written over it. A failed background
    write is raised by the next `now`; `now` returns the files whose renderer failed (save_all), the last write's."""

    def __init__(self, outdir: OutDir | None):
        self.outdir = outdir
        self._seq = itertools.count(1)
        self._cv = threading.Condition()
        self._pending: tuple[int, dict, list | None] | None = None
        self._write = threading.Lock()
        self._written = 0
        self._error: BaseException | None = None
        self.failed: list[str] = []
        self._thread: threading.Thread | None = None

    def on_change(self, session: Session, data: dict, claims: list) -> None:
        if self.outdir is None:
            return
        with self._cv:
            self._pending = (next(self._seq), data, claims)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="diagnose-saver", daemon=True)
                self._thread.start()
            self._cv.notify()

    def __call__(self, session: Session) -> None:
        """A copy of `session` as it stands, written in the background (its claims derived there)."""
        if self.outdir is not None:
            self.on_change(session, session.to_dict(), None)

    def _loop(self) -> None:
        while True:
            with self._cv:
                while self._pending is None:
                    self._cv.wait()
                seq, data, cl = self._pending
                self._pending = None
            t0 = time.monotonic()
            try:
                self._put(seq, lambda data=data: Session.from_dict(data), cl)
            except Exception as e:  # noqa: BLE001 - kept for the next `now`, which raises it where it is heard
                self._error = e
            # At most one background write per SAVE_EVERY_S: the copies that arrive meanwhile cost one write. A write
            # of Round 9's 6.5 MB session took 0.7 s of the parent's CPU, and 15 runs ending within a few seconds
            # each asked for one.
            time.sleep(max(0.0, t0 + SAVE_EVERY_S - time.monotonic()))

    def _put(self, seq: int, session, cl: list | None) -> None:
        with self._write:
            if seq > self._written:
                self.failed = save_all(self.outdir.path, session(), cl) or []
                self._written = seq

    def now(self, session: Session, cl: list | None = None) -> list[str]:
        if self.outdir is None:
            return []
        seq = next(self._seq)
        with self._cv:
            self._pending = None
        self._put(seq, lambda: session, cl)
        if self._error is not None:
            e, self._error = self._error, None
            raise e
        return self.failed
