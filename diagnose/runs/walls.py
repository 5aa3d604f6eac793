"""The file system, /proc, /dev and loopback walls of a run's jail (runs/jail.py), made by its init inside the
run's fresh mount and network namespaces before the step starts. Each returns what it made, and why anything
could not be made: what is missing is named in every report, never assumed.
"""
from __future__ import annotations

import ctypes
import os

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
# statvfs's flags that a read-only remount must keep (a user namespace may not drop a locked one)
_KEPT_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
               (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))

# What a GPU program opens in /dev: the rest (disks above all) stays out of a run's reach
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEVICE_PREFIXES = ("nvidia", "dri", "nvidia-caps", "kfd")
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


def mount(libc, src, target: str, fstype, flags: int, data=None) -> None:
    checked(libc.mount(_enc(src), target.encode(), _enc(fstype), flags, _enc(data)))


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
    from diagnose.runs import rootfs
    try:
        rootfs.build(libc, asked, rec)
    except OSError as e:       # no allow-list root: the run would see this machine's files
        raise OSError(e.errno, f"the run's own file system could not be built: {e.strerror}") from e
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

    from diagnose.runs.rootfs import under
    closed = 0
    for path in dict.fromkeys(sockets):
        try:
            if under(os.path.realpath(path), root) or not stat.S_ISSOCK(os.lstat(path).st_mode):
                continue          # the run's own, or not there in the run's view (a private /tmp, a mask)
            mount(libc, "/dev/null", path, None, MS_BIND)
            closed += 1
        except OSError:
            continue
    return closed


def remount_ro(libc, path: str) -> None:
    flags = os.statvfs(path).f_flag
    kept = sum(ms for st, ms in _KEPT_FLAGS if flags & st)
    mount(libc, None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | kept)


def private_dev(libc, new: str, shm: str) -> None:
    """A /dev of the run's own in the new root: the devices a GPU program opens, and the run's shm; no disk."""
    names = [n for n in sorted(os.listdir("/dev")) if n in DEVICES or n.startswith(DEVICE_PREFIXES)]
    dev = os.path.join(new, "dev")
    os.mkdir(dev)
    mount(libc, "none", dev, "tmpfs", MS_NOSUID, "mode=0755,size=64k")
    for n in names:
        fd = os.open(f"/dev/{n}", os.O_PATH)
        try:
            target = os.path.join(dev, n)
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.mkdir(target)
            else:
                open(target, "w").close()
            mount(libc, f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        finally:
            os.close(fd)
    os.mkdir(os.path.join(dev, "shm"))
    mount(libc, shm, os.path.join(dev, "shm"), None, MS_BIND)
    for name, src in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                      ("stderr", "/proc/self/fd/2")):
        os.symlink(src, os.path.join(dev, name))
    os.mkdir(os.path.join(dev, "pts"))


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
