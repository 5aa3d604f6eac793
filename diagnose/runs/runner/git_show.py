"""Two versions of one file from git, for `diagnose bisect --git GOOD..BAD PATH` (the runner is the only
part of diagnose that starts processes). Takes a revision range and a path; gives both texts."""
from __future__ import annotations

import subprocess
from pathlib import Path

from diagnose.errors import BadInput


def versions(spec: str, path: Path) -> tuple[str, str]:
    good, sep, bad = spec.partition("..")
    if not sep or not good or not bad:
        raise BadInput(f"--git must be REV_GOOD..REV_BAD, got {spec!r}")
    where = path.resolve().parent
    try:
        top = subprocess.run(["git", "-C", str(where), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BadInput(f"--git: git cannot be run here: {e}") from None
    if top.returncode != 0:
        raise BadInput(f"--git: {path} is not in a git repository")
    rel = path.resolve().relative_to(Path(top.stdout.strip()).resolve()).as_posix()
    out = []
    for rev in (good, bad):
        r = subprocess.run(["git", "-C", top.stdout.strip(), "show", f"{rev}:{rel}"], capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 0:
            raise BadInput(f"--git: no {rel} at {rev}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ''}")
        out.append(r.stdout)
    return out[0], out[1]
