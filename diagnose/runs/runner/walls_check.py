"""How a run is walled off here: the walls its steps are asked for (runs/jail.py makes them), and the check from
inside a small step in the same jail that a command runs before any run, which tries each wall and names what did
not hold (`missing`), whatever the jail believed. The report, each triage row and a triage's header say it.
"""
from __future__ import annotations

import json
import shutil
import socket
import sys
from pathlib import Path

from diagnose.runs.runner.child import Limits
from diagnose.runs.runner.container import AREAS, OUTPUTS_DIR, SPAWNED_DIR, Container, child_env
from diagnose.runs.runner.isolate import run_child
from diagnose.runs.runner.lent import lent_paths
from diagnose.runs.settings import Settings

# What a run's jail is checked against from inside (StageRunner.isolation): each key is one wall, true if it held.
_WALL_TEST = r"""
import json, os, socket, stat, sys
outside, port = sys.argv[1], int(sys.argv[2])
from diagnose.runs.jail_names import unpack
walls = unpack(os.environ.get("DIAGNOSE_WALLS")) or {}
seen = {int(n) for n in os.listdir("/proc") if n.isdigit()}
def wrote():
    try:
        with open(os.path.join(outside, "wrote"), "w"):
            return True
    except OSError:
        return False
def reached():
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False
def disks():
    for n in os.listdir("/dev"):
        try:
            if stat.S_ISBLK(os.lstat("/dev/" + n).st_mode):
                return True
        except OSError:
            pass
    return False
def keyring():
    import ctypes, platform
    nr = {"x86_64": 248, "aarch64": 217}.get(platform.machine())
    if nr is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(nr, b"user", b"diagnose-wall-test", b"x", 1, -4) >= 0   # add_key to the user's keyring
def privileged():
    try:
        return open("/proc/self/uid_map").read().split()[1] == "0"      # root of this machine, seen from here
    except (OSError, IndexError):
        return os.getuid() == 0
caps = int(next(x for x in open("/proc/self/status") if x.startswith("CapEff:")).split()[1], 16)
print(json.dumps({"walls": walls, "pid namespace": seen <= {1, os.getpid()}, "network namespace": not reached(),
                  "read-only file system": not wrote(), "private /dev": not disks(),
                  "capabilities dropped": not caps & (1 << 21), "syscalls refused": not keyring(),
                  "allow-list file system": not os.path.exists(outside), "unprivileged": not privileged()}))
"""
# The walls a run lacks when the user leaves them off (DIAGNOSE_PRIVATE_MOUNTS=0) or the check cannot run
MISSING_WHEN_OFF = ("pid namespace", "network namespace", "read-only file system", "private /dev",
                    "capabilities dropped", "syscalls refused", "allow-list file system", "unprivileged")


def jail_for(s: Settings, box: Container, tmp: Path) -> dict | None:
    """The walls a run's steps are asked for: a file system of the run's own that shows only what it needs (the
    system, what this machine lends it: runner/lent.py, its container), its container's areas writable (its own
    folder read-only: it could plant links there that the tool, outside the jail, would write through), the out
    folders hidden where a lent place holds one. None: left off, as the user asked. tmp: the runner's folder."""
    if not s.private_mounts:
        return None
    return {"root": str(box.root), "writable": [str(box.root / a) for a in (*AREAS, SPAWNED_DIR, OUTPUTS_DIR)],
            "tmpdir": str(tmp.parent), "shared": list(s.shared), "hide": list(s.hidden),
            "paths": lent_paths(), "net": s.network != "host"}


def isolation(s: Settings, tmp: Path, jail_of) -> dict:
    """Whether a small step in a run's jail sees any process but its own and its init, reaches a port this process
    listens on, writes outside its container, finds a disk in /dev, holds CAP_SYS_ADMIN or reaches the keyring.
    jail_of(container): the walls asked for."""
    if not s.private_mounts:
        return {"namespace": None, "private": [], "why": "left off (DIAGNOSE_PRIVATE_MOUNTS=0)",
                "missing": list(MISSING_WHEN_OFF)}
    root = Container(tmp / "isolation-check")
    outside = tmp / "isolation-outside"
    outside.mkdir(exist_ok=True)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as lsn:
            lsn.bind(("127.0.0.1", 0))
            lsn.listen(1)
            return _try_walls(root, outside, lsn.getsockname()[1], jail_of(root))
    finally:
        shutil.rmtree(root.root, ignore_errors=True)
        shutil.rmtree(outside, ignore_errors=True)


def _try_walls(root: Container, outside: Path, port: int, jail: dict | None) -> dict:
    argv = [sys.executable, "-S", "-c", _WALL_TEST, str(outside), str(port)]
    try:
        child = run_child(argv, cwd=str(root.work), env=child_env(root, None),
                          stacks_path=str(root.tool / "isolation.stacks.txt"), limits=Limits(60.0, None), jail=jail)
        rec = json.loads(child.stdout_tail.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError) as e:
        return {"namespace": None, "private": [], "why": f"the check failed: {type(e).__name__}",
                "missing": list(MISSING_WHEN_OFF)}
    walls = rec.pop("walls", None) or {}
    failed = [name for name, held in rec.items() if not held]
    walls["missing"] = sorted(set(walls.get("missing") or []) | set(failed))
    walls.setdefault("namespace", walls.get("jail"))
    if failed and not walls.get("why"):
        walls["why"] = "tried from inside a run, these did not hold: " + ", ".join(failed)
    return walls
