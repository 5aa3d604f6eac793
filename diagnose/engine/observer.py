"""What the engine tells whoever watches a diagnosis: one interface in place of loose callbacks (as xdist's DSession
hears each node's events through one object). The CLI's progress display and its file writer each implement the
part they care for; every method is a no-op here, so an observer overrides only those.

The engine calls these from several threads: an observer keeps its own lock. Nothing here writes a file.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from diagnose.analysis.audit.claims import Claim
    from diagnose.session import Run, Session


class Observer:
    """Every event of a diagnosis, each a no-op until overridden."""

    def on_stage(self, run: Run) -> None:
        """A stage of `run` ended (a failed stage comes together with the skipped ones after it)."""

    def on_run_done(self, run: Run) -> None:
        """`run` ended (or was never started: see its note)."""

    def on_verdict(self, session: Session, what: str, claims: list[Claim]) -> None:
        """Said before the end: 'verdict' once the verdict is decided, then 'cause' once the causes stand.
        `claims` are the session's as the engine settled them (analysis/audit/claims.py)."""

    def on_change(self, session: Session, data: dict, claims: list[Claim]) -> None:
        """The session changed: `data` is it in plain data (a copy taken under the engine's lock, never changed
        after), `claims` what it states. Called once per change, never for a session that did not change."""


class Observers(Observer):
    """Several observers heard as one, in order."""

    def __init__(self, *each: Observer):
        self.each = each

    def on_stage(self, run):
        for o in self.each:
            o.on_stage(run)

    def on_run_done(self, run):
        for o in self.each:
            o.on_run_done(run)

    def on_verdict(self, session, what, claims):
        for o in self.each:
            o.on_verdict(session, what, claims)

    def on_change(self, session, data, claims):
        for o in self.each:
            o.on_change(session, data, claims)
