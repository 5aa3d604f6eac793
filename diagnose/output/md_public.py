"""report.md as a GitHub issue takes it whole: the long evidence folded into <details> blocks under headings that
stay visible, no table without a value, and no path of this machine (public.py) in code, fences or prose.
Split from markdown.py, which assembles the sections and calls `publish` last.
"""
from __future__ import annotations

import re

from diagnose.output import public
from diagnose.output.text import code_span, fence, tail
from diagnose.session import Session
from probes import door

# What each folded section holds, as its <summary> says it (plain text: it is HTML, not Markdown)
SUMMARIES = {
    "## Where the time went": "the hottest lines of the submission per phase, from the sampler",
    "## Evidence per run": "every run: outcome, phase times, compiling, steady cost, waits; the probes",
    "## Timeline": "each stage's phases as a Gantt chart",
    "## Suspects found in the source": "every suspect the scan found, with its line",
    "## Stages of the baseline run": "each stage's phases, timings, resources and compile step",
    "## Failure": "the exception, the stacks and stderr of the failed stage",
    "## Compile metrics": "torch.compile's seconds per layer, per run and stage",
    "## State kept between processes": "what each step left in the container and who read it",
    "## Environment": "the machine, the harness, the container and the budgets",
}
SUMMARIES.update(door.values("REPORT"))     # each probe's own section: its words
_LONG = 4        # a body of more non-empty lines than this (or any table or fence) is folded


def details(summary: str, body: list[str]) -> list[str]:
    while body and not body[-1].strip():
        body = body[:-1]
    return [f"<details><summary>{summary}</summary>", "", *body, "", "</details>", ""]


def fold(lines: list[str]) -> list[str]:
    """A section with its heading shown and its body, when long, in a <details> block."""
    if len(lines) < 3 or lines[0] not in SUMMARIES:
        return lines
    body = lines[2:]
    if sum(1 for x in body if x.strip()) <= _LONG and not any(x.startswith(("|", "```")) for x in body):
        return lines
    return lines[:2] + details(SUMMARIES[lines[0]], body)


def stacks(text: str, cap: int) -> list[str]:
    """A stack dump as a report shows it: the submission's threads (the main one and those it started), the
    tool's own threads counted and left out, its tail when long."""
    shown, left = public.submission_threads(text)
    out = fence(tail(shown.rstrip(), cap))
    if left:
        out += ["", f"Left out above: {left} thread(s) of diagnose's own worker (its watchdog, sampler and metrics "
                    f"poller), not the submission's."]
    return out


# -- tables without a value -----------------------------------------------------------------------------------

_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
_CELL = re.compile(r"(?<!\\)\|")
_NONE = {"", "n/a", "—", "-", "**n/a**", "`n/a`"}


def _cells(row: str) -> list[str]:
    return [c.strip() for c in _CELL.split(row.strip())[1:-1]]


def _empty_tables(lines: list[str]) -> list[str]:
    """Each table whose every cell past the first column (the row's name) is n/a, — or empty: one line
    instead, naming its columns."""
    out, i, code = [], 0, _in_fence(lines)
    while i < len(lines):
        if code[i] or not (lines[i].startswith("|") and i + 1 < len(lines) and _RULE.match(lines[i + 1])):
            out.append(lines[i])
            i += 1
            continue
        j = i + 2
        while j < len(lines) and lines[j].startswith("|"):
            j += 1
        rows = [_cells(r)[1:] for r in lines[i + 2:j]]
        if rows and all(c in _NONE for r in rows for c in r):
            cols = ", ".join(c for c in _cells(lines[i])[1:] if c)
            out.append(f"_No value to show ({cols}): every row's was n/a, so the table is left out._")
        else:
            out += lines[i:j]
        i = j
    return out


# -- paths of this machine ------------------------------------------------------------------------------------

_TICKS = re.compile(r"`+")


def _line(line: str, scrub) -> str:
    """One line outside a fence: code spans scrubbed as they are, prose with each renamed path in a span."""
    out, pos, plain = [], 0, 0
    while (m := _TICKS.search(line, pos)) is not None:
        close = next((c for c in _TICKS.finditer(line, m.end()) if len(c.group()) == len(m.group())), None)
        if close is None:             # a lone run of backticks is literal text
            pos = m.end()
            continue
        out += [scrub(line[plain:m.start()], code_span), scrub(line[m.start():close.end()])]
        pos = plain = close.end()
    return "".join(out) + scrub(line[plain:], code_span)


def _in_fence(lines: list[str]) -> list[bool]:
    """Per line: inside a fenced block (its opening and closing lines included)."""
    fence, out = None, []
    for line in lines:
        bare = line.strip()
        if fence is None and bare.startswith("```"):
            fence = len(bare) - len(bare.lstrip("`"))
            out.append(True)
        else:
            out.append(fence is not None)
            if fence is not None and bare and set(bare) == {"`"} and len(bare) >= fence:
                fence = None
    return out


def _scrubbed(lines: list[str], s: Session) -> list[str]:
    scrub = public.scrubber(s)
    return [scrub(line) if code else _line(line, scrub) for line, code in zip(lines, _in_fence(lines), strict=True)]


def publish(md: str, s: Session) -> str:
    """The rendered report as it is written: no table without a value, no path of this machine."""
    return "\n".join(_scrubbed(_empty_tables(md.split("\n")), s))
