"""The exit-code rules, which CI goes by: 0 nothing wrong, 1 a problem found, 2 bad input, 3 this machine
cannot judge the submission (it needs a GPU it lacks)."""
from __future__ import annotations

from diagnose.session import Session
from diagnose.status import Status

EXIT = {Status.OK: 0, Status.NEEDS_GPU: 3}     # everything else that finished: 1 (a problem was found)


def exit_code(session: Session) -> int:
    return EXIT.get(session.verdict.status, 1)


def check_exit(session: Session, safe: bool) -> int:
    if session.verdict.status == Status.NEEDS_GPU:
        return 3
    return 0 if safe else 1
