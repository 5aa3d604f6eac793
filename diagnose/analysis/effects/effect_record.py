"""One toggle's measured effect on its run (effects.py measures it): whether the baseline reached the suspect's
work, whether the variant's run took it away, and what else the edit changed."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Effect:
    reached: bool | None      # the baseline did the suspect's work (None: nothing measures it)
    removed: bool | None      # the variant's run no longer did it, or did it differently (None: unmeasured)
    what: str                 # what was measured, in numbers
    moved: bool = False       # the work ran again in the variant, where the edit moved it
    identical: bool = False   # the variant is the submission itself: it changed nothing
    outside: tuple[str, ...] = ()   # what else the edit changed, outside the suspect's own work
    partly: bool = False      # the work is still there, but less of it each time (removed is None then)

    @property
    def acted(self) -> bool:
        """The toggle took the suspect's work away in a run that had it: the only kind of run that can clear
        the suspect or be credited to it."""
        return not self.identical and self.reached is True and self.removed is True and not self.moved

    @property
    def untaken(self) -> bool:
        """The toggle did not take: the variant is the submission itself, or its run still did work the baseline
        reached. Work only moved is evidence of its own ("deferring it only moves it"), and work the baseline never
        reached was no suspect of this run's: neither is untaken."""
        return self.identical or (self.removed is False and self.reached is not False and not self.moved)

    def why_not(self) -> str:
        """Why this run cannot stand for 'without the suspect', in one clause."""
        if self.identical:
            return "the variant is the submission itself: the toggle changed nothing"
        if self.reached is False:
            return f"not reached: {self.what}"
        if self.moved:
            return f"only moved: {self.what}"
        if self.partly:
            return f"took only part of it away: {self.what}"
        if self.removed is False:
            return f"ran unchanged: {self.what}"
        return f"not measured: {self.what}"
