"""The walls of a run's jail (runs/jail.py) that its init makes inside the run's fresh mount and network namespaces
before the step starts: the file system (rootfs.py builds it from an allow-list), /proc, the loopback, and this
machine's path sockets closed. Each returns what it made, and why anything could not be made: what is missing is
named in every report, never assumed.
"""
from __future__ import annotations

import os

from diagnose.runs import rootfs
from diagnose.runs.mounts import MS_BIND, MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_PRIVATE, MS_REC, mount


def make_walls(libc, kind: str, asked: dict, sockets: list[str] = ()) -> dict:
    """The run's /proc, loopback and file system walls. Returns what holds, and why anything does not."""
    rec: dict = {"jail": kind, "missing": [], "hidden": [], "private": [], "kept": [], "read_only": []}
    mount(libc, "none", "/", None, MS_REC | MS_PRIVATE)
    if "+net" not in kind:
        rec["missing"].append("network namespace")
        rec.setdefault("why", "this machine's network, as asked (DIAGNOSE_NETWORK=host)")
    else:
        try:
            _loopback_up()
        except OSError as e:
            rec.setdefault("why", f"the run's loopback stayed down: {e}")
    if not asked.get("root"):
        try:
            mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError as e:
            rec["missing"].append("pid namespace")
            rec["why"] = f"/proc of the run's own was refused ({e}): /proc still lists this machine's processes"
        return rec
    try:
        rootfs.build(libc, asked, rec)
    except OSError as e:       # no allow-list root: the run would see this machine's files
        where = f" ({e.filename})" if e.filename else ""
        raise OSError(e.errno, f"the run's own file system could not be built: {e.strerror}{where}") from e
    rec["sockets_closed"] = _close_sockets(libc, sockets, os.path.realpath(asked["root"]))
    return rec


SOCKETS_CAP = 4000


def path_sockets() -> list[str]:
    """Every Unix socket of this machine bound to a path (/proc/net/unix, in this machine's network namespace)."""
    out = []
    try:
        with open("/proc/net/unix") as fh:
            next(fh, None)
            for line in fh:
                f = line.split(None, 7)
                if len(f) == 8 and f[7].startswith("/"):
                    out.append(f[7].rstrip("\n"))
    except OSError:
        return []
    return out[:SOCKETS_CAP]


def _close_sockets(libc, sockets, root: str) -> int:
    """/dev/null over each of this machine's Unix sockets that the run could still reach by its path: the network
    namespace does not close them (a path socket is found through the file system), nor does a read-only mount
    (connecting writes nothing). Those bound later than the run's start stay open. Returns how many were closed."""
    import stat

    closed = 0
    for path in dict.fromkeys(sockets):
        try:
            if rootfs.under(os.path.realpath(path), root) or not stat.S_ISSOCK(os.lstat(path).st_mode):
                continue          # the run's own, or not there in the run's view (a private /tmp, a mask)
            mount(libc, "/dev/null", path, None, MS_BIND)
            closed += 1
        except OSError:
            continue
    return closed


def _loopback_up() -> None:
    """The namespace's own loopback, up: NCCL and a local server still work, nothing of this machine answers."""
    import fcntl
    import socket
    import struct
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, siocgifflags, req))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))
