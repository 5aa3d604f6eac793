"""What a triage runs over: files, folders of *.py (searched below them), and manifests (one path a line,
relative to the manifest; blank lines and `#` comments skipped). Each becomes an item: its key (ledger.py), its
report folder, and its command's argv in two forms: from the triage's folder, with the paths as the user gave them
(a report then names them as the user did), and with whole paths, for a worker without that folder."""
from __future__ import annotations

import os
from pathlib import Path

from diagnose.errors import BadInput
from diagnose.triage.ledger import key_of


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


def as_given(path: str, cwd: str) -> str:
    """A path the user gave, for a command that runs in the triage's folder: whole paths below it become relative
    (a report then names no machine's layout); a name that starts with '-' gets './', or it reads as an option."""
    if os.path.isabs(path):
        rel = os.path.relpath(path, cwd)
        path = path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel
    return "./" + path if path.startswith("-") else path


def items(paths: list[Path], depth: str, answer: dict, root: Path, out: str, flags: dict[str, list[str]]) -> list[dict]:
    """answer: the options that change a submission's answer (its key); out: --out as the user named it; flags:
    those options as the child's flags, "here" (paths as given) and "whole" (resolved)."""
    cwd, items_ = os.getcwd(), []
    for p in expand(paths):
        key = key_of(p, {"depth": depth, **answer})
        rel = f"reports/{p.stem.lstrip('.')[:40] or 'submission'}-{key[:10]}"      # never a hidden folder
        report_dir = str((root / rel).resolve())
        here = [as_given(str(p), cwd), "--out", as_given(str(Path(out) / rel), cwd)]
        items_.append({"file": os.path.abspath(p), "shown": str(p), "key": key, "report": rel,
                       "report_dir": report_dir, "cwd": cwd,
                       "argv": [depth, *here, "--quiet", *flags["here"]],
                       "argv_whole": [depth, os.path.abspath(p), "--out", report_dir, "--quiet", *flags["whole"]]})
    return items_
