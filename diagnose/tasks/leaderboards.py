"""A leaderboard's name to its problem folder, from a local reference-kernels checkout: its `problems/*.yaml`
files list each leaderboard's `name`, `directory` and `gpus`, as KernelBot reads them. A submission's
`#!POPCORN leaderboard NAME` header then needs no --problem. Parent side, static.
"""
from __future__ import annotations

import difflib
import os
from pathlib import Path

import yaml

from diagnose.errors import BadInput

ENV = "DIAGNOSE_PROBLEMS_ROOT"


def problems_dir(root: str | Path) -> Path:
    """The checkout's problems/ folder (the checkout itself, or problems/ given directly)."""
    r = Path(root).expanduser()
    if (r / "problems").is_dir():
        return r / "problems"
    if r.is_dir() and any(r.glob("*.yaml")):
        return r
    raise BadInput(f"{root}: not a reference-kernels checkout (no problems/*.yaml in it)")


def index(root: str | Path) -> dict[str, dict]:
    """name -> {directory, gpus, listed_in} over every problems/*.yaml (the first listing of a name wins)."""
    base = problems_dir(root)
    out: dict[str, dict] = {}
    for y in sorted(base.glob("*.yaml")):
        try:
            doc = yaml.safe_load(y.read_text(encoding="utf-8")) or {}
        except (yaml.YAMLError, OSError, UnicodeDecodeError):
            continue
        for p in doc.get("problems") or [] if isinstance(doc, dict) else []:
            if isinstance(p, dict) and isinstance(p.get("name"), str) and isinstance(p.get("directory"), str):
                out.setdefault(p["name"], {"directory": base / p["directory"], "listed_in": y.name,
                                           "gpus": [str(g) for g in p.get("gpus") or []]})
    return out


def root_from(option: str | Path | None) -> Path | None:
    value = option or os.environ.get(ENV)
    return Path(value) if value else None


def resolve(name: str, root: str | Path) -> dict:
    """The leaderboard's entry; an unknown name is bad input that lists the close matches."""
    known = index(root)
    if name in known:
        entry = known[name]
        if not (entry["directory"] / "task.yml").is_file():
            raise BadInput(f"leaderboard '{name}' ({entry['listed_in']}): its folder {entry['directory']} has no "
                           f"task.yml")
        return {"name": name, **entry}
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
    hint = f"; close matches: {', '.join(close)}" if close else f"; {len(known)} leaderboards are listed there"
    raise BadInput(f"leaderboard '{name}' is not in {problems_dir(root)}/*.yaml{hint}")
