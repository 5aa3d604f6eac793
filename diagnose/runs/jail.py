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
run as `python -S FILE` (runpy's -m costs it 30 ms): it imports only the standard library, jail_names.py and
walls.py (the walls init makes; to wall the file system, worker/container.py).
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
from diagnose.runs.mounts import checked, load_libc  # noqa: E402
from diagnose.runs.userns import map_ids, unprivileged  # noqa: E402
from diagnose.runs.walls import make_walls, path_sockets  # noqa: E402

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
CLONE_NEWNET, CLONE_NEWIPC = 0x40000000, 0x08000000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
# What a Docker container keeps by default (CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP,
# NET_BIND_SERVICE, NET_RAW, SYS_CHROOT, AUDIT_WRITE, SETFCAP), less MKNOD: Docker's device cgroup is what makes
# mknod harmless there, and this file has none. Everything else (SYS_ADMIN, SYS_PTRACE, DAC_READ_SEARCH, ...) goes.
DOCKER_CAPS = {0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 29, 31}
SIGNALS_SEEN = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGALRM, signal.SIGPIPE, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGCONT)


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
        checked(libc.unshare(flags))
        return kind
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EACCES):
            raise
    uid, gid = os.getuid(), os.getgid()
    checked(libc.unshare(flags | CLONE_NEWUSER))
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")      # the same ids inside: files keep their owner
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    return "user+" + kind


def outer(status_fd: int, argv: list[str]) -> int:
    """The runner's child: namespaces, then init; or, where they are refused, the worker itself."""
    libc = load_libc()
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)      # the runner gone, the run goes
    status = status_fd
    try:
        sockets = path_sockets()      # this machine's, seen from its own network namespace: before unsharing
        kind = _unshare(libc, (unpack(os.environ.get(JAIL_ENV)) or {}).get("net", True))
    except OSError as e:
        why = f"the kernel refused the run's own namespaces: {e}"
        os.environ[WALLS_ENV] = pack({"jail": None, "missing": list(MISSING_ALL), "why": why})
        _say(status, "refused", why=why)
        os.close(status)
        os.execv(argv[0], argv)
    ask_r, ask_w = os.pipe()        # init asks for its user's ids; outer, outside that namespace, maps them
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ask_r)
        os.close(done_w)
        try:
            os._exit(init(libc, status, kind, argv, sockets, (ask_w, done_r)))
        except BaseException as e:  # noqa: BLE001 - init must never fall back to the caller's code
            _say(status, "error", why=f"{type(e).__name__}: {e}")
            os._exit(70)
    os.close(status)
    os.close(ask_w)
    os.close(done_r)
    _quiet_stdio()
    map_ids(pid, kind, ask_r, done_w, bool((unpack(os.environ.get(JAIL_ENV)) or {}).get("shared")))
    while True:
        try:
            _, st = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 0
        except InterruptedError:
            continue
        except ChildProcessError:
            return 0


MISSING_ALL = ("pid namespace", "network namespace", "read-only file system", "private /dev", "capabilities dropped",
               "syscalls refused", "allow-list file system", "unprivileged")


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
def init(libc, status, kind: str, argv: list[str], sockets: list[str] = (), ids=None) -> int:
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)      # outer gone (the runner killed it), all go
    os.setsid()          # a session of the run's own: a signal to the step's group never reaches outer
    asked = unpack(os.environ.pop(JAIL_ENV, None)) or {}
    if ids is not None and os.read(ids[1], 1) != b"g":      # outer holds this process's /proc entry first
        raise OSError(errno.EPERM, "the jail's outer process went away")
    walls = make_walls(libc, kind, asked, sockets)
    if ids is not None:
        walls["uid"] = unprivileged(libc, kind, asked.get("writable") or [], *ids, shared=bool(asked.get("shared")))
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
        # sigwaitinfo, never sigtimedwait: the runner stops a run (SIGSTOP) while another times on its GPU, and a
        # sigtimedwait stopped past its timeout comes back in CPython with a siginfo it never filled (a signal
        # number of -46442256, or SIGQUIT from pid 1367718880): init then died, and the whole run with it, at
        # the end of every long pause. SIGCHLD is among the signals waited for, so no wait is needed to reap.
        info = signal.sigwaitinfo(SIGNALS_SEEN + (signal.SIGCHLD,))
        # a sender outside the namespace (the runner pausing the run) shows as pid 0: only the run's own count
        if info.si_signo in SIGNALS_SEEN and info.si_pid > 0:
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
    checked(libc.prctl(pr_set_seccomp, seccomp_mode_filter, fbuf, 0, 0))


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
