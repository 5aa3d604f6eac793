"""A run's file system, built from an allow-list: an empty root that shows what the run needs and nothing else.

The model is bubblewrap's (and Flatpak's): init (runs/jail.py) mounts an empty tmpfs, binds into it, each at its
own path, what a step of the run needs, and pivots into it; the machine's own root is then unmounted. Nothing is
visible that was not named here:

  the system      /usr, /etc, /sys and the /bin, /sbin, /lib* entries (as links where the machine has links),
                  read-only; a /proc of the run's own; a /dev with only what a GPU program opens
  lent            what the runner names in `paths` (runner/lent.py): the interpreter that runs the tool, whole
                  (its prefix with pyvenv.cfg, the base prefix, every sys.path entry and .pth target, wherever
                  they live), the tool's own packages, the libraries and compilers on PATH, LD_LIBRARY_PATH and
                  CUDA_HOME; read-only, with every link on the way made again as the machine has it
  the container   the run's own folder at its own path (read-only but for its areas), its tmp/ as /tmp, its
                  vartmp/ as /var/tmp and its shm/ as /dev/shm; the folders shared on purpose (DIAGNOSE_SHARE)

So the user's files, other runs' containers, a triage's inputs, ledger and keys, and every out folder are not
there at all, wherever the user keeps them. Where a place a run writes (the container's /tmp) must hold a mount
point, it is made without following any link: a link a run planted there must not take the jail's init, which
is still this machine's root, anywhere else.
"""
from __future__ import annotations

import os

from diagnose.runs.mounts import (
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    PROC_READ_ONLY,
    checked,
    mount,
    private_dev,
    remount_ro,
)
from diagnose.runs.worker.container import real_home, under

# The system's own places, bound read-only (or made again as links, where the machine has links: merged /usr)
SYSTEM = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
OWN = ("proc", "sys", "dev", "run")      # the run's own, or the system's as bound: never lent again below them
STAGE = ".diagnose/fs"        # under the container's own folder: where the new root is staged before the pivot
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
MNT_DETACH = 2


def build(libc, asked: dict, rec: dict) -> None:
    """The run's root: staged on a tmpfs in the container's own folder, then pivoted into. Fills rec."""
    root = os.path.realpath(asked["root"])
    cwd = os.getcwd()        # the step's working directory (the container's work/), at the same path inside
    new = os.path.join(root, STAGE)
    os.makedirs(new, exist_ok=True)
    mount(libc, "none", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    areas = {os.path.basename(a): os.path.realpath(a) for a in asked.get("writable") or []}
    _system(libc, new, rec)
    if "tmp" in areas:
        _bind(libc, areas["tmp"], new, "/tmp")
        rec["private"].append("/tmp")
    try:
        private_dev(libc, new, areas.get("shm") or os.path.join(root, "shm"))
        rec["private"].append("/dev/shm")
    except OSError as e:
        rec["missing"].append("private /dev")
        rec.setdefault("why", f"/dev is not the run's own: {e.strerror}")
    if "vartmp" in areas:
        _bind(libc, areas["vartmp"], new, "/var/tmp")
        rec["private"].append("/var/tmp")
    home = _real_home()
    if home and "home" in areas and not under(root, home):
        _bind(libc, areas["home"], new, home)       # the home `pwd` names is the container's, as HOME is
        rec["private"].append(home)
        rec["home"] = home
    lent = _lent(libc, new, asked.get("paths") or [], root, rec)
    _container(libc, new, root, areas, asked)
    for path in [os.path.realpath(p) for p in asked.get("shared") or [] if os.path.isdir(p)]:
        _bind(libc, path, new, path)
    rec["shared"] = [p for p in asked.get("shared") or [] if os.path.isdir(p)]
    rec["read_only"] = lent
    _pivot(libc, new)
    os.chdir("/")
    _hide(libc, asked.get("hide") or [], rec, [root, *lent])
    # the root itself read-only: the run makes nothing beside what it was given
    checked(libc.mount(None, b"/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None))
    rec["fs"] = "allow-list"
    os.chdir(cwd)


def _system(libc, new: str, rec: dict) -> None:
    for name in SYSTEM:
        host = "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), os.path.join(new, name))
        elif os.path.isdir(host):
            _bind(libc, host, new, host, read_only=True)
    if os.path.isdir("/sys"):
        _bind(libc, "/sys", new, "/sys", read_only=True)
    for name in ("run", "var"):        # empty: no daemon's socket, no machine state
        os.makedirs(os.path.join(new, name), exist_ok=True)
    proc = os.path.join(new, "proc")
    os.mkdir(proc)
    try:
        mount(libc, "proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        for name in PROC_READ_ONLY:
            if os.path.exists(os.path.join(proc, name)):
                _bind(libc, os.path.join(proc, name), new, f"/proc/{name}", read_only=True)
    except OSError as e:
        _bind(libc, "/proc", new, "/proc")
        rec["missing"].append("pid namespace")
        rec.setdefault("why", f"/proc of the run's own was refused ({e.strerror}): it lists this machine's processes")


def _real_home() -> str | None:
    """The home `pwd` names (worker/container.py), where it is no system place."""
    home = real_home()
    return home if home and not any(under(home, "/" + s) for s in (*SYSTEM, *OWN)) else None

def _lent(libc, new: str, paths: list[str], root: str, rec: dict) -> list[str]:
    """Each lent path resolvable in the new root as it is here: its links made again, its real place bound
    read-only. Returns the real places bound."""
    reals = []
    for p in paths:
        if not p or not os.path.lexists(p):
            continue
        try:
            _links(new, os.path.abspath(p))
        except OSError as e:
            rec.setdefault("unlent", []).append(f"{p}: {e.strerror}")
        real = os.path.realpath(p)
        if os.path.exists(real) and not under(real, root) and real != "/":
            reals.append(real)
    bound: list[str] = []
    for real in sorted(set(reals), key=lambda r: (r.count("/"), r)):
        if any(under(real, b) for b in bound) or any(under(real, "/" + s) for s in (*SYSTEM, *OWN)):
            continue
        try:
            _bind(libc, real, new, real, read_only=True)
        except OSError as e:     # that place stays out of the run; the preflight finds it if the run needs it
            rec.setdefault("unlent", []).append(f"{real}: {e.strerror}")
            continue
        bound.append(real)
        if any(under(real, t) for t in ("/tmp", "/var/tmp")):
            rec["kept"].append(real)        # under a private place: this machine's, not the run's
    return bound


def _links(new: str, path: str, depth: int = 0) -> None:
    """Every link on the way to `path` made again in the new root (as the machine has it), so that the path
    resolves there as it does here."""
    if depth > 20:
        return
    cur = "/"
    parts = [x for x in path.split("/") if x]
    for i, part in enumerate(parts):
        nxt = os.path.join(cur, part)
        if os.path.islink(nxt):
            target = os.readlink(nxt)
            dst = new + nxt
            if not os.path.lexists(dst) and not _inside_a_mount(new, nxt):
                parent = _open_in(new, cur)
                try:
                    os.symlink(target, part, dir_fd=parent)
                finally:
                    os.close(parent)
            resolved = os.path.normpath(os.path.join(cur, target))
            _links(new, os.path.join(resolved, *parts[i + 1:]), depth + 1)
            return
        cur = nxt


def _inside_a_mount(new: str, path: str) -> bool:
    """Whether `path` falls inside a place bound read-only (a lent one): nothing is made there. The run's own places
    (its /tmp, its home) and the new root's tmpfs are written to."""
    p = os.path.dirname(path)
    while p != "/" and not os.path.lexists(new + p):
        p = os.path.dirname(p)
    try:
        return bool(os.statvfs(new + p).f_flag & os.ST_RDONLY)
    except OSError:
        return True


def _container(libc, new: str, root: str, areas: dict, asked: dict) -> None:
    """The run's container at its own path, read-only but for its areas (a link the run planted in its top level
    is one the tool, outside the jail, would write through)."""
    _bind(libc, root, new, root)
    for area in asked.get("writable") or []:        # mounts of their own first: they stay writable
        real = os.path.realpath(area)
        if under(real, root) and real != root and os.path.isdir(real):
            _bind(libc, real, new, real)
    top = _open_in(new, root, make=False)
    try:
        remount_ro(libc, f"/proc/self/fd/{top}")
    finally:
        os.close(top)
    stage = _open_in(new, os.path.join(root, STAGE), make=False)    # seen from inside: empty, never the new root
    try:
        mount(libc, "none", f"/proc/self/fd/{stage}", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=4k,mode=0555")
    finally:
        os.close(stage)


def _pivot(libc, new: str) -> None:
    import platform
    nr = SYS_PIVOT_ROOT.get(platform.machine())
    if nr is None:
        raise OSError(38, "pivot_root: unknown architecture")
    old = os.path.join(new, ".old")
    os.mkdir(old)
    checked(libc.syscall(nr, new.encode(), old.encode()))
    os.chdir("/")
    checked(libc.umount2(b"/.old", MNT_DETACH))
    os.rmdir("/.old")


def _hide(libc, hidden: list[str], rec: dict, needed: list[str]) -> None:
    """An out folder that still lies in a lent place (a report written inside the tool's own folder): emptied. Not
    one that holds the run's own container or a lent place (--out over the folder that holds TMPDIR): the run needs
    what lies in it, and everything else there is not in the run's file system anyway."""
    for path in sorted((os.path.realpath(h) for h in hidden), key=len):
        if any(under(n, path) for n in needed):
            continue
        if os.path.isdir(path) and not any(under(path, h) for h in rec["hidden"]):
            try:
                mount(libc, "none", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
                rec["hidden"].append(path)
            except OSError as e:
                rec.setdefault("why", f"an out folder is not hidden from the run: {e.strerror}")


def _bind(libc, src: str, new: str, path: str, read_only: bool = False) -> None:
    """src bound at `path` in the new root, the mount point reached without following any link."""
    target = _open_in(new, path, directory=os.path.isdir(src))
    source = os.open(src, os.O_PATH)
    try:
        mount(libc, f"/proc/self/fd/{source}", f"/proc/self/fd/{target}", None, MS_BIND | MS_REC)
    finally:
        os.close(source)
        os.close(target)
    if read_only:
        top = _open_in(new, path, directory=os.path.isdir(src), make=False)      # now the mount's own root
        try:
            remount_ro(libc, f"/proc/self/fd/{top}")
        finally:
            os.close(top)


def _open_in(new: str, path: str, directory: bool = True, make: bool = True) -> int:
    """new + path opened (O_PATH), each missing part made on the way, no link followed: a place the run writes
    (its /tmp) may hold one it planted, and the jail's init is still this machine's root."""
    fd = os.open(new, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    parts = [x for x in path.split("/") if x]
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if last and not directory:
                if make and not os.path.lexists(os.path.join(f"/proc/self/fd/{fd}", part)):
                    os.close(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd))
                nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW, dir_fd=fd)
            else:
                if make:
                    try:
                        os.mkdir(part, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass
                nxt = os.open(part, (os.O_PATH if last else os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd
