"""The tool's one exception for bad input. The CLI turns it into one line on stderr and exit 2.

Failures of the submission are never exceptions: they are data in a run record (see session.py).
"""


class BadInput(Exception):
    """The user gave us something we cannot run: say what and where, in one line."""


class CannotJudge(Exception):
    """This machine cannot judge the submission (no GPU of its kind, a package it lacks): exit 3."""
