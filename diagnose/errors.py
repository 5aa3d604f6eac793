"""The tool's one exception for bad input. The CLI turns it into one line on stderr and exit 2.

Failures of the submission are never exceptions: they are data in a run record (see session.py).
"""


class BadInput(Exception):
    """The user gave us something we cannot run: say what and where, in one line."""


class CannotJudge(Exception):
    """This machine cannot judge the submission (no GPU of its kind, a package it lacks): exit 3."""


class Refused(Exception):
    """KernelBot would refuse the file before running anything (source/refusals.py): each reason, one line
    each; the CLI prints them and exits 1, a problem found."""

    def __init__(self, path: str, reasons: list):
        super().__init__(reasons[0].message if reasons else "refused")
        self.path, self.reasons = path, reasons
