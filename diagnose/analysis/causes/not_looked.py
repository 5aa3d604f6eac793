"""A session that ran no probe (`check`, `run --probes none`, `bisect`'s runs) looked for no cause: it names the
failure and where it happened, says the cause was not looked for, and gives the `diagnose run` command that would
look, built from the command the user ran. It never says what probes found. Pure.
"""
from __future__ import annotations

import shlex

from diagnose.findings import Inconclusive
from diagnose.session import Role, Run, Session
from diagnose.status import NOT_LOOKED, Status

# run's and check's options that take a value; of them and of the flags, those a run that looks must not repeat
_VALUED = {"--problem", "--problems-root", "--task", "--budget", "-b", "--compile-budget", "--stages", "-s",
           "--probes", "-p", "--jobs", "-j", "--repeat", "--gpus", "--out", "-o", "--fix", "--max-rss",
           "--sample-repeats", "--runner"}
_DROPPED = {"--probes", "-p", "--out", "-o", "--runner", "--quiet", "-q", "--verbose", "-v"}
ENDED = {Status.CRASH: "crashed", Status.TIMEOUT: "timed out", Status.WRONG: "returned a wrong result",
         Status.TAMPERED: "tampered with what judges it"}


def looked(session: Session) -> bool:
    """Whether any probe was asked to look: one planned (found its suspect or not), or a variant ran."""
    return bool(session.probes) or any(r.role in (Role.SINGLE, Role.COMBINATION) for r in session.runs)


def run_command(session: Session) -> str:
    """`diagnose run` with the user's own inputs (the file as the report names it, the problem, the budgets, the
    stages), less what would stop it looking (--probes) or is this command's own (--out, --quiet, ...)."""
    cmd, path = list(session.command), session.submission.get("path") or "submission.py"
    if len(cmd) < 3 or cmd[1] not in ("check", "run"):
        return shlex.join(["diagnose", "run", path])
    out, args, i, placed = ["diagnose", "run"], cmd[2:], 0, False
    while i < len(args):
        a = args[i]
        name = a.split("=", 1)[0] if a.startswith("--") else a[:2]
        takes = name in _VALUED and a == name        # not `--budget=60`, nor `-b60`
        if name in _DROPPED:
            pass
        elif a.startswith("-"):
            out += args[i:i + 1 + takes]
        elif not placed:
            out.append(path)
            placed = True
        else:
            out.append(a)
        i += 1 + takes
    return shlex.join(out if placed else out[:2] + [path] + out[2:])


def clause(session: Session, other: bool = False) -> str:
    """What a no-probe session says in place of what probes found; `other`: beside a cause its run showed."""
    if other:
        return f"no probe ran, so no other cause was looked for: `{run_command(session)}` would look"
    return f"its cause was not looked for (no probe ran): `{run_command(session)}` would look for it"


def not_looked(session: Session, base: Run, site: dict | None, returns: dict | None = None,
               hot: dict | None = None) -> Inconclusive:
    """The failure (status, stage, phase, the file's line where known) and that its cause was not looked for."""
    from diagnose.analysis.verdict.hotspots import describe
    st = base.failed_stage
    where = f" at {site['file']} line {site['line']}" if site else \
        f" at {returns['file']} line {returns['line']}, where custom_kernel returns" if returns else ""
    time = f"; where the time went: {describe(hot)}" if hot else ""
    phase = f" ({st.phase})" if st.phase else ""
    return Inconclusive(probe=NOT_LOOKED, evidence=[base.id], site=site or returns or (
        {"file": session.submission.get("path"), "line": hot["line"], "code": hot["code"]} if hot else None),
        reason=f"The submission {ENDED.get(st.status, str(st.status))} in {st.name}{phase}{where}{time}; "
               f"{clause(session)}")
