"""The mount calls a run's jail makes (runs/jail.py, walls.py, rootfs.py): libc's mount(2) with its flags, a
read-only remount that keeps the flags a user namespace may not drop, and a /dev of the run's own. Standard library
only: the jail runs under `python -S`.
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
