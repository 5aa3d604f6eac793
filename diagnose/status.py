"""How things end and how sure we are: the status of a stage, a run or a diagnosis, the groups of statuses the
rules use, confidence, and the kinds of warning. Shared by every layer; imports nothing of ours.
"""

from __future__ import annotations

import enum


class Status(str, enum.Enum):
    """How a stage, a run or the whole diagnosis ended."""
    OK = "ok"
    TIMEOUT = "timeout"
    CRASH = "crash"
    WRONG = "wrong"
    AT_RISK = "at_risk"          # passed, but a predicted stage time is over its budget
    TAMPERED = "tampered"        # the submission replaced what judges it, or forged the tool's events
    NEEDS_GPU = "needs_gpu"      # this machine cannot judge it (no CUDA, too few GPUs, a GPU too old)
    INTERRUPTED = "interrupted"  # the user stopped it
    SKIPPED = "skipped"          # an earlier stage failed, or the work was not needed
    INCOMPLETE = "incomplete"    # nothing finished

    def __str__(self) -> str:
        return self.value


FAILURES = (Status.TIMEOUT, Status.CRASH, Status.WRONG, Status.TAMPERED)


# Outcomes that say nothing about the submission: never evidence for or against a suspect.
NO_EVIDENCE = (Status.NEEDS_GPU, Status.INTERRUPTED, Status.SKIPPED, Status.INCOMPLETE)


TIME_BASED = (Status.TIMEOUT, Status.AT_RISK)


UNEXPLAINED = "the timeout itself"
# Inconclusive.probe of a session that ran no probe: the failure named, its cause not looked for
NOT_LOOKED = "not looked for"


# A stage that ends like this ends its run: the harness skips the later stages.
ENDS_RUN = FAILURES + (Status.NEEDS_GPU, Status.INTERRUPTED)


class Confidence(str, enum.Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    def __str__(self) -> str:
        return self.value


class Warning_(str, enum.Enum):
    """Typed warnings (as hyperfine does): each one is shown with the hint that fits it."""
    HOST_BUSY = "host_busy"              # runs waited for a CPU: timings are inflated
    CPU_TIMING = "cpu_timing"            # no GPU: CPU timings say nothing about a GPU budget
    UNCONFIRMED = "unconfirmed"          # a time-based conclusion could not be confirmed alone
    FLAKY = "flaky"                      # the same variant ended differently on a rerun
    CHANNEL = "channel"                  # the submission wrote to the tool's event channel

    def __str__(self) -> str:
        return self.value


def _enum(cls, value):
    return None if value is None else cls(value)


class Word(str, enum.Enum):
    """A closed set of words that a record saves as plain text: equal to its text, printed as it."""

    def __str__(self) -> str:
        return self.value


class PlanState(Word):
    """Where a probe's plan stands (probes/base.py)."""
    RUN = "run"
    ABSENT = "not present"
    NOT_APPLICABLE = "not applicable"
    CANNOT_TOGGLE = "cannot toggle"
    TUNE = "needs a tuning run"    # its toggle needs a search's result that no timed run reached


class Compared(Word):
    """A variant against the baseline (analysis/verdict/comparison.compare)."""
    SAME = "same"            # the same failure
    FIXED = "fixed"          # got past the baseline's failure
    MOVED = "moved"          # the same kind of failure, at a later stage
    DIFFERENT = "different"  # another failure at the same point
    BROKEN = "broken"        # the edit broke the program
    THIN = "thin"            # passed, but within the noise of a budget: at risk, not a fix
    UNKNOWN = "unknown"      # the runs cannot tell


class CauseKind(Word):
    """What kind of cause a ranked cause is (findings.Cause.kind)."""
    MECHANISM = "mechanism"        # a probe's suspect (or an interaction of several), shown by its toggle
    BUG = "bug"                    # the code itself, at its line
    HOT_SPOT = "hot_spot"          # where the time went, measured
    TOO_SLOW = "too_slow"          # the work itself, wherever it runs
    STALE_LOCK = "stale_lock"      # a build lock the killed compile step left
    HARNESS_RULE = "harness_rule"  # a rule of the harness's evaluator

