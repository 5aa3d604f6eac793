"""Whom a run is on this machine: root of a user namespace of its own, which is nobody here when the tool runs as
root (the tool's own user otherwise). Its init asks, once its walls are made; outer, still outside that namespace,
maps the ids (runs/jail.py). Standard library only: the jail runs under `python -S`.
"""
from __future__ import annotations

import errno
import os
import signal

from diagnose.runs.mounts import checked

CLONE_NEWUSER = 0x10000000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
# whom a run is, outside its namespace, when the tool runs as root: it can read only what anyone can
NOBODY = 65534


def run_ids(kind: str, shared: bool = False) -> int:
    """The id a run's processes have on this machine: nobody's when the tool is root and made the namespaces
    itself; the tool's own user otherwise (a user namespace made unprivileged can map no other), and where the user
    shares folders with every run (DIAGNOSE_SHARE: they are the user's, written as the user; the report says the
    run was not unprivileged)."""
    return NOBODY if os.geteuid() == 0 and not kind.startswith("user+") and not shared else os.geteuid()


def map_ids(pid: int, kind: str, ask_r: int, done_w: int, shared: bool = False) -> None:
    """init's user namespace mapped (its root is run_ids(kind) here), once init asks; nothing if it never does.
    init's /proc entry is opened before init may start: its pivot into the run's root moves outer's root too
    (they share a mount namespace), and no /proc there lists init by this number."""
    proc = None
    try:
        proc = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY)
        os.write(done_w, b"g")
        if os.read(ask_r, 1) != b"u":
            return
        uid = run_ids(kind, shared)
        gid = NOBODY if uid == NOBODY else os.getegid()
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            fd = os.open(name, os.O_WRONLY, dir_fd=proc)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
        os.write(done_w, b"k")
    except OSError:
        pass
    finally:
        for fd in (ask_r, done_w, proc):
            if fd is not None:
                os.close(fd)


def unprivileged(libc, kind: str, asked_writable: list, ask_w: int, done_r: int, shared: bool = False) -> int:
    """init, and the step after it, become root of a user namespace of their own, which is nobody on this
    machine (or the tool's own user): no capability over the run's mounts, and no file that id may not read is
    readable, a mode-600 file of root's included. Returns the id on this machine."""
    who = run_ids(kind, shared)
    if who != os.geteuid():
        hand_over(asked_writable, who)
    try:
        checked(libc.unshare(CLONE_NEWUSER))
        os.write(ask_w, b"u")
        if os.read(done_r, 1) != b"k":
            raise OSError(errno.EPERM, "the run's user ids were not mapped")
    finally:
        os.close(ask_w)
        os.close(done_r)
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    # a change of ids clears these: the run still ends with its runner, and its /proc entries stay its own
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    return who


def hand_over(areas: list[str], uid: int) -> None:
    """The run's writable areas owned by the id it runs as (the runner made them, or copied a warm container, as
    root). Walked by descriptor, never through a link: a process an earlier step left running may swap a folder
    for a link meanwhile, and this is still this machine's root."""
    for area in areas:
        try:
            top = os.open(area, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            os.chown(top, uid, uid)
            for _, dirs, files, dfd in os.fwalk(dir_fd=top, follow_symlinks=False):
                for name in dirs + files:
                    try:
                        if os.stat(name, dir_fd=dfd, follow_symlinks=False).st_uid != uid:
                            os.chown(name, uid, uid, dir_fd=dfd, follow_symlinks=False)
                    except OSError:
                        continue
        finally:
            os.close(top)
