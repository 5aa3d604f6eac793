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
