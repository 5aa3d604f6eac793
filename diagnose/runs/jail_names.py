"""The names a run's jail (runs/jail.py) shares with the runner and the worker, apart from protocol.py, and how
they pass it records. The jail starts in every step of every run, so it imports nothing it can do without: not
protocol.py's dataclasses, and not json (whose regular expressions cost a Python -S about 30 ms to import); its
records are marshal's, which is built into the interpreter that runs both ends.
"""
import marshal
import os

JAIL_ENV = "DIAGNOSE_JAIL"           # the walls a run's jail is asked for (a record, see pack)
WALLS_ENV = "DIAGNOSE_WALLS"         # the walls it made (or why it made none), for the worker to report
JAIL_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jail.py")   # run as `python -S FILE`
STEP_PID = 2                         # a jailed step's pid inside its namespace: its init's first and only fork


def pack(rec: dict) -> str:
    """A record as an environment variable's value."""
    return marshal.dumps(rec).hex()


def unpack(text: str | None) -> dict | None:
    try:
        rec = marshal.loads(bytes.fromhex(text or ""))
    except (ValueError, EOFError, TypeError):
        return None
    return rec if isinstance(rec, dict) else None


def frame(rec: dict) -> bytes:
    """A record on the status descriptor: its length, then the record."""
    data = marshal.dumps(rec)
    return len(data).to_bytes(4, "little") + data


def frames(buf: bytes) -> tuple[list[dict], bytes]:
    """The whole records at the start of buf, and what is left of it."""
    out = []
    while len(buf) >= 4:
        n = int.from_bytes(buf[:4], "little")
        if len(buf) < 4 + n:
            break
        try:
            rec = marshal.loads(buf[4:4 + n])
        except (ValueError, EOFError, TypeError):
            rec = None
        if isinstance(rec, dict):
            out.append(rec)
        buf = buf[4 + n:]
    return out, buf
