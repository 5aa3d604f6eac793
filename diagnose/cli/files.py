"""Writing results: atomic (temp file, then rename), so a crash mid-write never leaves a truncated file.
Only the CLI calls this."""
from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

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


def save_all(out: Path, session: Session) -> None:
    for name, fmt in FILES.items():
        write_atomic(out / name, RENDERERS[fmt](session))


class OutDir:
    """The output directory of one diagnosis, checked before any run starts and held for its whole
    length: a directory (created if missing) that we can write, and that no other diagnose run holds.
    The hold is an advisory lock on the directory itself, so nothing extra is left in it."""

    def __init__(self, path: Path, option: str = "--out"):
        self.path = path
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

    def save(self, session: Session) -> None:
        save_all(self.path, session)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
