"""The tool's exceptions that end a command before any report: bad input (one line on stderr and exit 2), a machine
that cannot judge, a run that cannot start, a file KernelBot would refuse.

Failures of the submission are never exceptions: they are data in a run record (see session.py).
"""


class BadInput(Exception):
    """The user gave us something we cannot run: say what and where, in one line."""


class CannotJudge(Exception):
    """This machine cannot judge the submission (no GPU of its kind, a package it lacks): exit 3."""


class CannotStart(Exception):
    """A run cannot start here at all (engine/preflight.py), so no run could say anything about the submission: one
    line, no report. `missing`: the package the worker's Python lacks (exit 3, this machine cannot judge); None:
    anything else, a fault of ours (exit 70)."""

    def __init__(self, message: str, missing: str | None = None):
        super().__init__(message)
        self.missing = missing


class Refused(Exception):
    """KernelBot would refuse the file before running anything (source/refusals.py): each reason, one line
    each; the CLI prints them and exits 1, a problem found."""

    def __init__(self, path: str, reasons: list):
        super().__init__(reasons[0].message if reasons else "refused")
        self.path, self.reasons = path, reasons
