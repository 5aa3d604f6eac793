"""The README's first command, run as a newcomer runs it (from a folder holding `examples/`, no --out), prints what
the README says it prints: each line of its sample block, in order, with `…` standing for what varies. The only
other lines, and the only additions to a line, are those a busy machine makes: a warning that says so, and which
solo rerun confirmed a time-based conclusion (or that none could); where it shows one, the later runs' numbers (the
sample's "(r8)") may be others, since its solo reruns took numbers before them.

The real run is tests/test_layouts.py's venv under ~ (its test_the_readme_shows_what_its_first_command_prints, with
this module's matching): that layout runs the README's command exactly, so one diagnosis serves both tests."""
from __future__ import annotations

import re
import shlex

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
# what a busy machine adds (analysis/verdict/evidence.py: the host-busy warning, a solo rerun's confirmation)
BUSY_LINES = (re.compile(r"  warning: the host was busy: .*"), re.compile(r"  confirmed by a solo rerun \(r\d+\)"))
BUSY_TAIL = r"(?: \(unconfirmed\))?"


def _install_block() -> str:
    start = README.index("## Install and try it")
    return README[README.index("```bash\n", start) + 8:README.index("```", README.index("```bash\n", start) + 8)]


def first_command() -> list[str]:
    line = next(x for x in _install_block().splitlines() if x.startswith("diagnose run "))
    return shlex.split(line.split("#")[0])[1:]


def sample_lines() -> list[str]:
    at = README.index("ends like this")
    start = README.index("```\n", at) + 4
    return README[start:README.index("```", start)].rstrip("\n").splitlines()


def _pattern(line: str, busy: bool = False) -> re.Pattern:
    text = ".+".join(map(re.escape, line.split("…")))
    if busy:        # its solo reruns take run numbers, so the runs started after them are numbered later
        text = re.sub(r"\\\(r\d+\\\)", lambda _: r"\(r\d+\)", text)
    return re.compile(text + BUSY_TAIL)


def unmatched(sample: list[str], got: list[str]) -> list[str]:
    """The sample's lines that the output does not show in order, and the output's lines that are neither one of
    them nor a busy machine's. Where the output shows a busy machine's line, a run's number may be another."""
    busy = any(b.fullmatch(x) for b in BUSY_LINES for x in got)
    wanted, extra = [_pattern(x, busy) for x in sample], []
    for line in got:
        if wanted and wanted[0].fullmatch(line):
            wanted.pop(0)
        elif not any(b.fullmatch(line) for b in BUSY_LINES):
            extra.append(f"not in the README: {line}")
    return [f"missing: {p.pattern}" for p in wanted] + extra


def test_the_matching_sees_a_changed_line():
    sample = sample_lines()
    assert first_command() == ["run", "examples/warmup_timeout.py", "--stages", "test", "--budget", "20"]
    got = [x.replace("…", "64x128x256") for x in sample]
    assert unmatched(sample, got + ["  warning: the host was busy: 60 s"]) == []
    assert unmatched(sample, [x.replace("(confidence high)", "(high)") for x in got])      # the README said once
    # a busy machine's solo reruns number the later runs otherwise; an idle one's output keeps the README's numbers
    renumbered = [re.sub(r"\(r\d+\)", "(r11)", x) for x in got]
    assert renumbered != got
    assert unmatched(sample, renumbered + ["  warning: the host was busy: 60 s"]) == []
    assert unmatched(sample, renumbered[:2] + ["  confirmed by a solo rerun (r9)"] + renumbered[2:]) == []
    assert unmatched(sample, renumbered)
