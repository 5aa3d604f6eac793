"""The file system, /proc, /dev and loopback walls of a run's jail (runs/jail.py), made by its init inside the
run's fresh mount and network namespaces before the step starts. Each returns what it made, and why anything
could not be made: what is missing is named in every report, never assumed.
"""
from __future__ import annotations

import ctypes
import os
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
# statvfs's flags that a read-only remount must keep (a user namespace may not drop a locked one)
_KEPT_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
               (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))

# What a GPU program opens in /dev: the rest (disks above all) stays out of a run's reach
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEVICE_PREFIXES = ("nvidia", "dri", "nvidia-caps", "kfd")
# Masked with an empty file system: where this machine's daemons keep their Unix sockets (docker's, dbus's), which
# a read-only mount does not close (connecting needs no write to the file system)
MASKED = ("/run", "/var/run")
# Read-only in the run's /proc, as in a Docker container: writing /proc/sysrq-trigger as root reboots the host
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "asound")


def load_libc():
    return ctypes.CDLL(None, use_errno=True)


def checked(rc: int) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def _enc(s):
    return s.encode() if isinstance(s, str) else s


def _mount(libc, src, target: str, fstype, flags: int, data=None) -> None:
    checked(libc.mount(_enc(src), target.encode(), _enc(fstype), flags, _enc(data)))


def make_walls(libc, kind: str, asked: dict, sockets: list[str] = ()) -> dict:
    """The run's /proc, loopback and file system walls. Returns what holds, and why anything does not."""
    rec: dict = {"jail": kind, "missing": [], "hidden": [], "private": [], "kept": [], "read_only": []}
    _mount(libc, "none", "/", None, MS_REC | MS_PRIVATE)
    try:
        _mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        for name in PROC_READ_ONLY:
            _read_only(libc, f"/proc/{name}")
    except OSError as e:
        rec["missing"].append("pid namespace")
        rec["why"] = f"/proc of the run's own was refused ({e}): /proc still lists this machine's processes"
    if "+net" not in kind:
        rec["missing"].append("network namespace")
        rec.setdefault("why", "this machine's network, as asked (DIAGNOSE_NETWORK=host)")
    else:
        try:
            _loopback_up()
        except OSError as e:
            rec.setdefault("why", f"the run's loopback stayed down: {e}")
    if asked.get("root"):
        _walls_for_files(libc, asked, rec, sockets)
    return rec


def _walls_for_files(libc, asked: dict, rec: dict, sockets: list[str] = ()) -> None:
    from diagnose.runs.worker import container
    root, shared = os.path.realpath(asked["root"]), [os.path.realpath(p) for p in asked.get("shared") or []]
    hidden = [os.path.realpath(p) for p in asked.get("hide") or [] if os.path.isdir(p)]
    needed = [root, *shared, sys.executable, *(asked.get("paths") or [])]
    # first: what follows binds nothing of them back. A folder inside one already hidden is hidden with it (a
    # check's --out inside its triage's folder). The reason names no path: a report names no machine's layout.
    for path in sorted(hidden, key=len):
        if any(container.under(path, h) for h in rec["hidden"]):
            continue
        if any(container.under(os.path.realpath(n), path) for n in needed):
            rec.setdefault("why", "an out folder is not hidden from the run: the run needs what lies in it")
            continue
        try:
            _mount(libc, "none", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
            rec["hidden"].append(path)
        except OSError as e:
            rec.setdefault("why", f"an out folder is not hidden from the run: {e.strerror}")
    try:
        _alone_in_parent(libc, root, asked.get("tmpdir") and os.path.realpath(asked["tmpdir"]),
                         [os.path.realpath(n) for n in needed])
    except OSError as e:
        rec["missing"].append("read-only file system")
        rec.setdefault("why", f"other runs' containers beside this one stay in its reach: {e}")
    for place in MASKED:      # where this machine's daemons keep their sockets (a socket is found by its path)
        if os.path.isdir(place) and not os.path.islink(place) and not any(container.under(n, place) for n in needed):
            try:
                _mount(libc, "none", place, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=0755")
            except OSError as e:
                rec.setdefault("why", f"{place} is not masked: {e}")
    walls = container.enter(root, shared, unshare=False, paths=asked.get("paths"))
    for key in ("private", "kept", "read_only", "home", "shared"):
        rec[key] = walls.get(key)
    if walls.get("why"):
        rec.setdefault("why", walls["why"])
    # the container's own folder read-only, its areas writable: a link the run planted in the container's top
    # level (or in the tool's folder there) is one the tool, outside the jail, would write through
    areas = [os.path.realpath(p) for p in asked.get("writable") or [root]]
    writable = [*areas, *shared, *(walls.get("private") or [])]
    if root not in areas:
        try:
            for area in areas:        # mounts of their own first: a bind made later copies the read-only flag
                if os.path.isdir(area) and area not in _mount_points():
                    _mount(libc, area, area, None, MS_BIND | MS_REC)
            _read_only_in_place(libc, root)
        except OSError as e:
            rec["missing"].append("read-only file system")
            rec.setdefault("why", f"the container's own folder stays writable: {e}")
    try:
        _private_dev(libc, root)
    except OSError as e:
        rec["missing"].append("private /dev")
        rec.setdefault("why", f"/dev stays this machine's: {e}")
    else:
        writable.append("/dev/shm")
    rec["sockets_closed"] = _close_sockets(libc, sockets, root)
    failed = _all_read_only(libc, writable)
    if failed:
        rec["missing"].append("read-only file system")
        rec.setdefault("why", f"{failed[0][0]} stays writable: {failed[0][1]}")


def _alone_in_parent(libc, root: str, tmpdir: str | None, needed: list[str]) -> None:
    """The runner's TMPDIR (where every diagnose command keeps its runs' containers), or failing that the folder of
    this command's runs, shows this run's container alone: an empty file system over it, with the container bound
    back in place. Under a private /tmp this is so already; a TMPDIR elsewhere would otherwise show the other runs'
    containers, read-only. A folder that holds anything else the run needs (the Python installation) is left."""
    from diagnose.runs.worker.container import under
    tops = [t for t in (tmpdir, os.path.dirname(root)) if t and under(root, t) and t != root]
    top = next((t for t in tops if not any(under(n, t) and not under(n, root) for n in needed)), None)
    if top is None:
        return
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    try:
        _mount(libc, "none", top, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
        os.makedirs(root)
        _mount(libc, f"/proc/self/fd/{fd}", root, None, MS_BIND | MS_REC)
    finally:
        os.close(fd)


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

    from diagnose.runs.worker.container import under
    closed = 0
    for path in dict.fromkeys(sockets):
        try:
            if under(os.path.realpath(path), root) or not stat.S_ISSOCK(os.lstat(path).st_mode):
                continue          # the run's own, or not there in the run's view (a private /tmp, a mask)
            _mount(libc, "/dev/null", path, None, MS_BIND)
            closed += 1
        except OSError:
            continue
    return closed


def _read_only_in_place(libc, path: str) -> None:
    """path becomes a read-only mount of its own, whatever is mounted below it staying as it is."""
    if path not in _mount_points():
        _mount(libc, path, path, None, MS_BIND | MS_REC)
    _remount_ro(libc, path)


def _read_only(libc, path: str) -> None:
    if os.path.exists(path):
        _mount(libc, path, path, None, MS_BIND | MS_REC)
        _remount_ro(libc, path)


def _remount_ro(libc, path: str) -> None:
    flags = os.statvfs(path).f_flag
    kept = sum(ms for st, ms in _KEPT_FLAGS if flags & st)
    _mount(libc, None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | kept)


def _mount_points() -> list[str]:
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            field = line.split()[4]
            out.append(field.encode().decode("unicode_escape"))    # \040 and friends: octal escapes
    return out


def _all_read_only(libc, writable: list[str]) -> list[tuple[str, str]]:
    """Every mount read-only but the run's own places, /proc and /dev. Returns those that stayed writable."""
    from diagnose.runs.worker.container import under
    keep = {os.path.realpath(p) for p in writable}
    for path in keep:      # a writable place that is no mount of its own becomes one, so it can stay writable
        if path not in _mount_points():
            _mount(libc, path, path, None, MS_BIND | MS_REC)
    failed = []
    for mp in dict.fromkeys(_mount_points()):
        if mp in keep or under(mp, "/proc") or under(mp, "/dev") or not os.path.exists(mp):
            continue
        if any(under(mp, k) for k in keep) and not _is_ro(mp):
            # below a writable place: the worker's own read-only binds (the installation) are already read-only;
            # anything else there belongs to the run
            continue
        try:
            _remount_ro(libc, mp)
        except OSError as e:
            failed.append((mp, str(e)))
    return failed


def _is_ro(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _private_dev(libc, root: str) -> None:
    """A /dev of the run's own: the devices a GPU program opens, and the run's shm; no disk of this machine."""
    names = [n for n in sorted(os.listdir("/dev")) if n in DEVICES or n.startswith(DEVICE_PREFIXES)]
    fds = {n: os.open(f"/dev/{n}", os.O_PATH) for n in names}
    shm = os.path.join(root, "shm")
    try:
        _mount(libc, "none", "/dev", "tmpfs", MS_NOSUID, "mode=0755,size=64k")
        for n, fd in fds.items():
            target = f"/dev/{n}"
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.mkdir(target)
            else:
                open(target, "w").close()
            _mount(libc, f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        os.mkdir("/dev/shm")
        _mount(libc, shm, "/dev/shm", None, MS_BIND)
        for name, src in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                          ("stderr", "/proc/self/fd/2")):
            os.symlink(src, f"/dev/{name}")
        os.mkdir("/dev/pts")
    finally:
        for fd in fds.values():
            os.close(fd)


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
