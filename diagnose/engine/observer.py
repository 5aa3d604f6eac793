"""What the engine tells whoever watches a diagnosis: one interface in place of loose callbacks (as xdist's DSession
hears each node's events through one object). The CLI's progress display and its file writer each implement the
part they care for; every method is a no-op here, so an observer overrides only those.

The engine calls these from several threads: an observer keeps its own lock. Nothing here writes a file.
"""
from __future__ import annotations

import threading
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


class Muting(Observer):
    """Another observer, which the run pool mutes while a run's start is still being checked (engine/preflight.py):
    meanwhile what it would hear of stages and runs is kept and handed on in order once unmuted, or dropped where
    the pool said so (a problem folder's reference check, which no one is shown)."""

    def __init__(self, inner: Observer):
        self.inner, self.muted = inner, False
        self._lock = threading.Lock()
        self._kept: list | None = None

    def mute(self, keep: bool) -> None:
        with self._lock:
            self.muted, self._kept = True, ([] if keep else None)

    def unmute(self) -> None:
        with self._lock:
            kept, self._kept, self.muted = self._kept or [], None, False
        for hear, run in kept:
            hear(run)

    def _hear(self, hear, run) -> None:
        with self._lock:
            if self.muted:
                if self._kept is not None:
                    self._kept.append((hear, run))
                return
        hear(run)

    def on_stage(self, run):
        self._hear(self.inner.on_stage, run)

    def on_run_done(self, run):
        self._hear(self.inner.on_run_done, run)

    def on_verdict(self, session, what, claims):
        self.inner.on_verdict(session, what, claims)

    def on_change(self, session, data, claims):
        self.inner.on_change(session, data, claims)
