"""What a triage runs over: files, folders of *.py (searched below them), and manifests (one path a line,
relative to the manifest; blank lines and `#` comments skipped). Each submission gets a key from its content, the
settings and its path, so a second triage with the same inputs and settings knows what already finished."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from diagnose.errors import BadInput


def expand(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(x for x in p.rglob("*.py") if x.is_file() and not any(
                part.startswith(".") or part == "__pycache__" for part in x.relative_to(p).parts))
            out += found
        elif p.is_file() and p.suffix == ".py":
            out.append(p)
        elif p.is_file():
            out += _manifest(p)
        else:
            raise BadInput(f"{p}: no such file or folder")
    seen, unique = set(), []
    for p in out:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    if not unique:
        raise BadInput(f"no *.py file in {', '.join(map(str, paths))}")
    return unique


def _manifest(path: Path) -> list[Path]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        raise BadInput(f"{path}: not a .py file, and not a manifest of paths (one a line)") from None
    out = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        p = (path.parent / line) if not Path(line).is_absolute() else Path(line)
        if not p.is_file():
            raise BadInput(f"{path}:{n}: {line}: no such file")
        out.append(p)
    return out


def key_of(path: Path, settings: dict) -> str:
    """The submission's content, every setting that changes its answer, and where it lies (two files with the
    same content are two rows)."""
    h = hashlib.sha256(path.read_bytes())
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    h.update(str(path.resolve()).encode())
    return h.hexdigest()[:16]
