"""A run's own process space, network and file system: what a harness container gives one submission.

The harness starts every submission in a container of its own, where the only process the submission can see
besides its own is the harness's parent process. This module gives each step of a run the same walls, so that
nothing a submission does reaches the tool, another run, a triage's cluster or the user's files:

  outer  the runner's child, in this machine's process space. It unshares a PID, mount, network and IPC
         namespace (through a user namespace when it lacks the privilege), forks `init`, and waits for it.
  init   pid 1 inside: the harness's parent process as the step sees it. It mounts a /proc of its own (which
         lists only the run's processes), brings up a loopback of its own (no other socket of this machine is
         reachable, the tool's and Dask's included), walls the file system (the run's container writable; a
         /dev with only what a GPU program opens; every other mount read-only; the tool's out folders hidden),
         then forks the step. Afterwards it only reaps, records each signal sent to it and by whom (a
         submission that signals its parent signals init, which ignores it), and writes the step's exit.
  step   pid 2 inside. It drops the capabilities a harness container lacks (a Docker default set, less
         mknod), then execs the worker.

Everything init learns goes to the runner as JSON lines on a status descriptor: the walls it made ("walls"),
the step's start ("started"), signals sent to init ("signal"), the step's exit ("exit"). init lives until
every process of the run has ended, as a container does: what a step leaves running ends with the run (the
runner kills it), and a step whose child holds its stdout open stays open, as the harness's does.

Where the kernel refuses a namespace, outer records why and execs the worker itself, which makes /tmp private
where it still can (worker/container.py); every report then names the walls that were missing. This file is
run as `python -S FILE` (runpy's -m costs it 30 ms): it imports only the standard library, jail_names.py and, to
wall the file system, worker/container.py.
"""
from __future__ import annotations

import sys

if __name__ == "__main__":      # run as a file: its own folder is no place to import from
    del sys.path[0]

import ctypes  # noqa: E402
import errno  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402

from diagnose.runs.jail_names import JAIL_ENV, WALLS_ENV, frame, pack, unpack  # noqa: E402

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
CLONE_NEWNET, CLONE_NEWIPC = 0x40000000, 0x08000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
# statvfs's flags that a read-only remount must keep (a user namespace may not drop a locked one)
_KEPT_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
               (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))
PR_SET_PDEATHSIG, PR_CAPBSET_DROP = 1, 24
# What a Docker container keeps by default (CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP,
# NET_BIND_SERVICE, NET_RAW, SYS_CHROOT, AUDIT_WRITE, SETFCAP), less MKNOD: Docker's device cgroup is what makes
# mknod harmless there, and this file has none. Everything else (SYS_ADMIN, SYS_PTRACE, DAC_READ_SEARCH, ...) goes.
DOCKER_CAPS = {0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 29, 31}
# What a GPU program opens in /dev: the rest (disks above all) stays out of a run's reach
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEVICE_PREFIXES = ("nvidia", "dri", "nvidia-caps", "kfd")
# Masked with an empty file system: where this machine's daemons keep their Unix sockets (docker's, dbus's), which
# a read-only mount does not close (connecting needs no write to the file system)
MASKED = ("/run", "/var/run")
# Read-only in the run's /proc, as in a Docker container: writing /proc/sysrq-trigger as root reboots the host
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "asound")
SIGNALS_SEEN = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGALRM, signal.SIGPIPE, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGCONT)


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(rc: int) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def _enc(s):
    return s.encode() if isinstance(s, str) else s


def _mount(libc, src, target: str, fstype, flags: int, data=None) -> None:
    _check(libc.mount(_enc(src), target.encode(), _enc(fstype), flags, _enc(data)))


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


# -- outer ---------------------------------------------------------------------------------------------------
def _unshare(libc, net: bool) -> str:
    """The run's own namespaces; through a user namespace when this process lacks the privilege. net=False keeps
    this machine's network (DIAGNOSE_NETWORK=host: a submission that downloads at run time, as KernelBot's
    containers let it; the tool's own ports are then in its reach, and every report says so)."""
    flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | (CLONE_NEWNET if net else 0)
    kind = "pid+mount+net+ipc" if net else "pid+mount+ipc"
    try:
        _check(libc.unshare(flags))
        return kind
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EACCES):
            raise
    uid, gid = os.getuid(), os.getgid()
    _check(libc.unshare(flags | CLONE_NEWUSER))
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")      # the same ids inside: files keep their owner
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    return "user+" + kind


def outer(status_fd: int, argv: list[str]) -> int:
    """The runner's child: namespaces, then init; or, where they are refused, the worker itself."""
    libc = _libc()
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)      # the runner gone, the run goes
    status = status_fd
    try:
        sockets = _path_sockets()      # this machine's, seen from its own network namespace: before unsharing
        kind = _unshare(libc, (unpack(os.environ.get(JAIL_ENV)) or {}).get("net", True))
    except OSError as e:
        why = f"the kernel refused the run's own namespaces: {e}"
        os.environ[WALLS_ENV] = pack({"jail": None, "missing": list(MISSING_ALL), "why": why})
        _say(status, "refused", why=why)
        os.close(status)
        os.execv(argv[0], argv)
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(init(libc, status, kind, argv, sockets))
        except BaseException as e:  # noqa: BLE001 - init must never fall back to the caller's code
            _say(status, "error", why=f"{type(e).__name__}: {e}")
            os._exit(70)
    os.close(status)
    _quiet_stdio()
    while True:
        try:
            _, st = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 0
        except InterruptedError:
            continue
        except ChildProcessError:
            return 0


MISSING_ALL = ("pid namespace", "network namespace", "read-only file system", "private /dev", "capabilities dropped",
               "syscalls refused")


def _say(status: int, kind: str, **fields) -> None:
    try:
        os.write(status, frame({"k": kind, **fields}))
    except (OSError, ValueError):
        pass


def _quiet_stdio() -> None:
    """Neither outer nor init holds the step's stdout or stderr: the step ends when its own processes close them."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


# -- init ----------------------------------------------------------------------------------------------------
def init(libc, status, kind: str, argv: list[str], sockets: list[str] = ()) -> int:
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)      # outer gone (the runner killed it), all go
    os.setsid()          # a session of the run's own: a signal to the step's group never reaches outer
    asked = unpack(os.environ.pop(JAIL_ENV, None)) or {}
    walls = make_walls(libc, kind, asked, sockets)
    os.environ[WALLS_ENV] = pack(walls)
    _say(status, "walls", **walls)
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS_SEEN + (signal.SIGCHLD,))
    pid = os.fork()
    if pid == 0:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            # a group of the step's own, led by it: init leads its session, and a group numbered 1 would make the
            # step's killpg(getpgrp()) a kill(-1), every process but init
            os.setpgid(0, 0)
            _refuse_syscalls(libc)
            _drop_caps(libc)
            os.execv(argv[0], argv)
        except BaseException as e:  # noqa: BLE001 - the step never runs the jail's code past this point
            os.write(2, f"the run's jail could not start {argv[0]}: {type(e).__name__}: {e}\n".encode())
        os._exit(127)
    _say(status, "started", pid=pid)
    _quiet_stdio()
    return _reap(status, pid)


def _reap(status, step: int) -> int:
    """Reap every process of the run until none is left; say when the step ends and who signals init."""
    while True:
        info = signal.sigtimedwait(SIGNALS_SEEN + (signal.SIGCHLD,), 1.0)
        # a sender outside the namespace (the runner pausing the run) shows as pid 0: only the run's own count
        if info is not None and info.si_signo != signal.SIGCHLD and info.si_pid > 0:
            _say(status, "signal", sig=signal.Signals(info.si_signo).name, sender=info.si_pid)
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 0
            if pid == 0:
                break
            if pid == step:
                code = os.waitstatus_to_exitcode(st)
                _say(status, "exit", **({"code": code} if code >= 0 else {"signal": -code}))


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
    for path in hidden:   # first: what follows binds nothing of them back
        if any(container.under(os.path.realpath(n), path) for n in needed):
            rec.setdefault("why", f"{path} is not hidden from the run: the run needs what lies in it")
            continue
        try:
            _mount(libc, "none", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
            rec["hidden"].append(path)
        except OSError as e:
            rec.setdefault("why", f"{path} is not hidden from the run: {e}")
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


def _path_sockets() -> list[str]:
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


# Refused with EPERM, as Docker's default seccomp profile refuses them: the kernel's keyrings are per user, not per
# namespace (a run could read this machine's keys, or leave one behind); the rest would undo or dodge the walls.
# By architecture (AUDIT_ARCH_*): add_key, request_key, keyctl, unshare, setns, mount, umount2, pivot_root, bpf,
# open_by_handle_at, kexec_load, init_module, finit_module, delete_module, userfaultfd.
REFUSED_SYSCALLS = {
    0xC000003E: (248, 249, 250, 272, 308, 165, 166, 155, 321, 304, 246, 175, 313, 176, 323),      # x86_64
    0xC00000B7: (217, 218, 219, 97, 268, 40, 39, 41, 280, 265, 104, 105, 273, 106, 282),           # aarch64
}


def _refuse_syscalls(libc) -> None:
    """A seccomp filter on the step and all it starts: REFUSED_SYSCALLS fail with EPERM, everything else runs."""
    import struct
    ld_abs, jeq, ret = 0x20, 0x15, 0x06     # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    allow, kill, eperm = 0x7FFF0000, 0x80000000, 0x00050000 | 1      # SECCOMP_RET_ALLOW, KILL_PROCESS, ERRNO(EPERM)
    arch = next((a for a in REFUSED_SYSCALLS if _this_arch(a)), None)
    if arch is None:
        return
    nrs = REFUSED_SYSCALLS[arch]
    prog = [(ld_abs, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, kill), (ld_abs, 0, 0, 0)]
    for i, nr in enumerate(nrs):       # jump to the EPERM at the end if it is one of them
        prog.append((jeq, len(nrs) - i, 0, nr))
    prog += [(ret, 0, 0, allow), (ret, 0, 0, eperm)]
    raw = b"".join(struct.pack("=HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw)
    fprog = struct.pack("@HP", len(prog), ctypes.addressof(buf))      # struct sock_fprog, native alignment
    fbuf = ctypes.create_string_buffer(fprog)
    pr_set_seccomp, seccomp_mode_filter = 22, 2
    _check(libc.prctl(pr_set_seccomp, seccomp_mode_filter, fbuf, 0, 0))


def _this_arch(audit_arch: int) -> bool:
    import platform
    return {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}.get(platform.machine()) == audit_arch


def _drop_caps(libc) -> None:
    try:
        last = int(open("/proc/sys/kernel/cap_last_cap").read())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        if cap not in DOCKER_CAPS:
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)


def main(args: list[str]) -> int:
    status_fd, argv = int(args[0]), args[2:] if args[1:2] == ["--"] else args[1:]
    os.set_inheritable(status_fd, False)      # the step must not hold it: its end tells the runner init is gone
    return outer(status_fd, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
