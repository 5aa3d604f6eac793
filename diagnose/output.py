"""Writing results: atomic (temp file, then rename), so a crash mid-write never leaves a truncated file.
Only the CLI calls this."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from diagnose.renderers import RENDERERS
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
