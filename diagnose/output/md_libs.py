"""report.md's parts about the libraries that spend time for the submission: each probe's own section (Triton's
autotuner, torch's extension builds), from the baseline run's own records. Split from markdown.py, which
assembles them."""
from __future__ import annotations

from functools import partial

from diagnose.output.text import code_span


def probe_sections() -> list:
    """Each probe's own section of the report (its `report` hook, probes/spec.py), in the registry's order, given
    the renderer's code span."""
    from probes import door
    return [partial(door.of(p, "report"), code=code_span) for p in door.implementing("report")]
