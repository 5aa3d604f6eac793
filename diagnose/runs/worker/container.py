"""Inside the child, before anything else runs: make /tmp and /dev/shm the run's own.

The environment already points HOME, TMPDIR and every cache into the run's container (runner/container.py).
Absolute paths are another matter: a submission that writes /tmp/plan.json or makes a POSIX semaphore in
/dev/shm would share it with every other run and leave it behind. Where the kernel lets this process
have a mount namespace of its own (as root, or through a user namespace), /tmp becomes the container's
tmp/ and /dev/shm its shm/. Paths this process still needs under /tmp (the container itself, the Python
installation, the tool, directories on PATH) are bound back at the same place, so nothing else changes.
/var/tmp becomes the container's vartmp/, and this machine's real home directory (the one `pwd` names:
HOME is already the container's) its home/, so no route reaches this machine's state there. The Python
installation is bound read-only in place.

It must run while the process has a single thread: a user namespace cannot be entered otherwise.
Whatever the kernel refuses is recorded, and the run goes on with the environment's isolation only.
"""
from __future__ import annotations

import ctypes
import errno
import os
import sys

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MS_REMOUNT, MS_RDONLY = 32, 1
MNT_DETACH = 2


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _call(fn, *args) -> None:
    if fn(*args) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def _mount(libc, src: str, target: str, flags: int) -> None:
    _call(libc.mount, src.encode(), target.encode(), None, flags, None)


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _unshare(libc) -> str:
    """A mount namespace of our own; through a user namespace when we lack the privilege. Returns which."""
    try:
        _call(libc.unshare, CLONE_NEWNS)
        return "mount"
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EACCES):
            raise
    uid, gid = os.getuid(), os.getgid()
    _call(libc.unshare, CLONE_NEWUSER | CLONE_NEWNS)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")      # the same ids inside: files keep their owner
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    return "user+mount"


def under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def neededunder(top: str, paths) -> list[str]:
    """The fewest directories under `top` that cover every path given (existing directories only)."""
    found = sorted({os.path.realpath(p) for p in paths if p and os.path.isdir(p)})
    inside = [p for p in found if under(p, top)]
    out: list[str] = []
    for p in inside:
        if not any(under(p, q) for q in out):
            out.append(p)
    return out


def _make_private(libc, target: str, source: str, keep: list[str], writable: list[str]) -> None:
    """Bind `source` over `target`, then bind each path of `keep` (all under target) back in place: read-only,
    except the run's own container and the directories shared on purpose."""
    fds = [os.open(p, os.O_PATH | os.O_DIRECTORY) for p in keep]
    try:
        _mount(libc, source, target, MS_BIND)
        try:
            for p, fd in zip(keep, fds, strict=False):
                os.makedirs(p, exist_ok=True)
                _mount(libc, f"/proc/self/fd/{fd}", p, MS_BIND | MS_REC)
                if any(under(p, w) for w in writable):
                    continue            # the run's own container, or a directory shared on purpose
                # a kept directory that holds the container (the runner started in a folder above its TMPDIR) is
                # read-only like the rest; the container inside it first becomes a mount of its own, writable (a
                # bind made after the remount would copy its read-only flag)
                for w in writable:
                    if under(w, p) and w != p and os.path.isdir(w):
                        _mount(libc, w, w, MS_BIND | MS_REC)
                _call(libc.mount, None, p.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY, None)
        except OSError:
            libc.umount2(target.encode(), MNT_DETACH)
            raise
    finally:
        for fd in fds:
            os.close(fd)


def real_home() -> str | None:
    """This machine's home directory for this user, as `pwd` finds it (HOME is already the container's)."""
    import pwd
    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
    except (KeyError, OSError):
        return None
    return os.path.realpath(home) if home and os.path.isdir(home) and os.path.realpath(home) != "/" else None


def installation(root: str) -> list[str]:
    """The Python installation (its prefixes): what every run needs from this machine, bound read-only."""
    return [p for p in {os.path.realpath(x) for x in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
            if os.path.isdir(p) and not under(p, root) and not under(root, p)]


def _read_only(libc, path: str) -> None:
    _mount(libc, path, path, MS_BIND | MS_REC)
    _call(libc.mount, None, path.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY, None)


def enter(root: str, shared: list[str] = (), unshare: bool = True, paths: list[str] | None = None) -> dict:
    """Make /tmp, /dev/shm, /var/tmp and the real home directory private to this run where the kernel
    allows, and the Python installation read-only. Returns what was done. unshare=False: in the mount
    namespace this process already has (the run's jail made it); paths: what the Python that runs next
    imports from (this process's sys.path when not given)."""
    rec: dict = {"namespace": None, "private": [], "kept": []}
    if not sys.platform.startswith("linux"):
        rec["why"] = "no mount namespaces on this platform"
        return rec
    libc = _libc()
    try:
        rec["namespace"] = _unshare(libc) if unshare else "jail"
        _call(libc.mount, b"none", b"/", None, MS_REC | MS_PRIVATE, None)
    except (OSError, AttributeError) as e:
        rec["namespace"] = None
        rec["why"] = f"the kernel refused a mount namespace: {e}"
        return rec
    cwd = os.getcwd()
    shared = [os.path.realpath(p) for p in shared if os.path.isdir(p)]
    wanted = [root, cwd, *shared, sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable),
              *(sys.path if paths is None else paths), *os.environ.get("PATH", "").split(os.pathsep)]
    home = real_home()
    places = [("/tmp", "tmp"), ("/dev/shm", "shm"), ("/var/tmp", "vartmp")] + ([(home, "home")] if home else [])
    for target, area in places:
        if not os.path.isdir(target):
            continue
        keep = neededunder(target, wanted)
        if target in keep:
            rec.setdefault("why", f"{target} is not private: this tool or its Python lives in {target} itself")
            continue
        try:
            _make_private(libc, target, os.path.join(root, area), keep, [os.path.realpath(root), *shared])
        except OSError as e:
            rec.setdefault("why", f"{target} is not private: {e}")
            continue
        rec["private"].append(target)
        rec["kept"] += keep
    rec["home"] = home if home in rec["private"] else None
    rec["shared"] = shared
    # What this machine lends the run (its Python, the tool) is read-only: a write there would outlive the run
    rec["read_only"] = []
    for path in installation(root):
        try:
            _read_only(libc, path)
            rec["read_only"].append(path)
        except OSError as e:
            rec.setdefault("why", f"{path} is not read-only: {e}")
    os.chdir(cwd)     # through the path again: it may now resolve through a bind made above
    return rec
