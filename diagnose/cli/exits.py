"""Every exit code of `run` and `check`, in one place: the rules the commands exit by, the table their
`--help` prints and the README's table (a test checks that it is `markdown()`), which CI goes by.

`check` ends in exactly one word (output/console.Word), and each word has a code of its own. `run` keeps its
coarser set: 0 nothing wrong, 1 a problem found. Imports nothing heavy: `diagnose --help` prints the table.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from diagnose.status import Status

if TYPE_CHECKING:
    from diagnose.session import Session

BAD_INPUT = 2          # a bad value, file or folder: one `error:` line, before any process starts
CANNOT_JUDGE = 3       # this machine cannot judge the submission (a GPU it lacks, a package a run's Python lacks)
REFUSED = 1            # KernelBot would refuse the file before running it (too large, empty, not UTF-8, "stream")
INTERNAL = 70          # a bug in diagnose ended the command (sysexits' EX_SOFTWARE)
SIGNALS = {2: 130, 15: 143}   # SIGINT, SIGTERM: 128 + the signal, as a shell reports a process a signal ended

# check's words (console.Word's values) and their codes; INTERRUPTED takes the signal's code
CHECK = {"SAFE": 0, "PASSED ON CPU": 0, "FAILS": 1, "CANNOT JUDGE HERE": CANNOT_JUDGE, "AT RISK": 4,
         "INCONCLUSIVE": 5, "INTERRUPTED": None}
RUN = {Status.OK: 0, Status.NEEDS_GPU: CANNOT_JUDGE}     # everything else that finished: 1 (a problem was found)

SAME, NONE = "the same", "-"
# (code, what it means for `check`, for `run`): the one table the help and the README print
TABLE = (
    (0, "SAFE, or PASSED ON CPU (timing is not judged without a GPU)", "OK: every stage passed"),
    (1, "FAILS: a crash, wrong result, timeout or tampering; or REFUSED: KernelBot would not run the file",
     "a problem was found (or REFUSED), or no verdict was reached"),
    (BAD_INPUT, "bad input or usage (one error: line, before any run)", SAME),
    (CANNOT_JUDGE, "CANNOT JUDGE HERE: it needs a GPU (or a package) this machine lacks", SAME),
    (4, "AT RISK: a pass with a thin margin or prediction, or an error-level risk in the source", NONE),
    (5, "INCONCLUSIVE: the runs cannot say (a bug of ours in a run, a run cut short)", NONE),
    (INTERNAL, "a bug in diagnose ended the command (one line)", SAME),
    (130, "INTERRUPTED by SIGINT: only what finished is judged; the partial session is kept", SAME),
    (143, "INTERRUPTED by SIGTERM: the same", SAME),
)


def stopped_code(signum: int) -> int:
    return SIGNALS.get(signum, 128 + signum)


def exit_code(session: Session) -> int:
    """`run`'s code from its verdict (a signal's code is the caller's)."""
    return RUN.get(session.verdict.status, 1)


def check_exit(word, signum: int | None = None) -> int:
    """check's code for its word; INTERRUPTED is the signal's."""
    code = CHECK[str(word)]
    return code if code is not None else stopped_code(signum or 2)


def help_text() -> str:
    """The table for `--help`: click re-wraps a paragraph unless its first line is \\b."""
    rows = [f"  {code:<4} {check}" + ("" if run == SAME else f"  (run: {run})" if run != NONE else "")
            for code, check, run in TABLE]
    only = " and ".join(str(code) for code, _, run in TABLE if run == NONE)
    return f"\b\nExit codes (run's where it differs; {only} are check's only):\n" + "\n".join(rows)


def markdown() -> str:
    """The README's exit-code table."""
    lines = ["| exit | `check` | `run` |", "|---|---|---|"]
    lines += [f"| {code} | {check} | {'(not used)' if run == NONE else run} |" for code, check, run in TABLE]
    return "\n".join(lines) + "\n"
