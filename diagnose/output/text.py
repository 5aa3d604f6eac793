"""Safe text for reports and the console: what the submission controls is data, never markup.

A message, a path or a line of code may hold backticks, brackets or newlines. In Markdown it goes into
a code span or a fence longer than any run of backticks inside it; on the console it is escaped for
Rich (see console.py). Tracebacks fold library frames so the submission's frames come first.
"""
from __future__ import annotations

import re

_TICKS = re.compile(r"`+")


def code_span(text: str, limit: int = 400) -> str:
    """Inline code that no content can break out of."""
    # A silent cut, mid-word: marking it (findings.clip) re-renders nine committed examples whose verdict quotes a
    # long evaluator message (conv2d-correct, popcorn-conv2d-b200, the triages' conv2d_ref): left for that decision
    t = " ".join(str(text).split())[:limit]
    if not t:
        return "``"
    longest = max((len(m) for m in _TICKS.findall(t)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if t.startswith("`") or t.endswith("`") else ""
    return f"{ticks}{pad}{t}{pad}{ticks}"


def tail(text: str, limit: int) -> str:
    """The last `limit` characters of a long output, a traceback or stacks (evidence), from a line's start, saying
    what was left out above them."""
    if len(text) <= limit:
        return text
    kept = text[-limit:].split("\n", 1)[-1]
    return f"(… {len(text) - len(kept):,} characters above left out)\n{kept}"


def fence(text: str, lang: str = "") -> list[str]:
    longest = max((len(m) for m in _TICKS.findall(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return [f"{ticks}{lang}", text, ticks]


def _is_sub(f: dict, name: str) -> bool:
    return f.get("file", "").endswith(name)


def fold_frames(frames: list[dict], submission_name: str, shown: str | None = None) -> list[str]:
    """Traceback lines, outermost first: the submission's frames in full (named `shown`, the path it was
    given as), each run of library frames folded into one line that says how many there were and where."""
    out, run = [], []

    def flush():
        if not run:
            return
        where = sorted({_lib(f["file"]) for f in run})
        out.append(f"  … {len(run)} library frame(s) in {', '.join(where[:3])}{' …' if len(where) > 3 else ''}")
        run.clear()
    for f in frames:
        if _is_sub(f, submission_name):
            flush()
            out.append(f'  File "{shown or submission_name}", line {f["line"]}, in {f.get("func", "?")}')
            if f.get("code"):
                out.append(f"    {f['code'].strip()}")
        else:
            run.append(f)
    flush()
    return ["Traceback (most recent call last):"] + out


_INSTALLED = re.compile(r"/(?:site-packages|dist-packages|lib/python\d+\.\d+)/")


def _probe_at(p: str) -> int:
    """Where '/probes/<name>/' of one of the registered probes starts in a path (its worker hook's), else -1: a
    user's folder or another package named probes is not the tool's."""
    from probes.door import known
    i = p.find("/probes/")
    return i if i >= 0 and known(p[i + 8:].split("/", 1)[0]) and p.count("/", i + 8) == 1 else -1


def _lib(path: str) -> str:
    """'torch/_dynamo' for '…/site-packages/torch/_dynamo/eval_frame.py', 'json/decoder.py' for the standard
    library's, 'diagnose/runs' for the tool's own and 'probes/<name>' for a probe's worker hook; elsewhere the
    file and its folder, never the directories above them (a home, a user name)."""
    p = path.replace("\\", "/")
    own = p.find("/diagnose/") if "/diagnose/" in p else _probe_at(p)
    m = _INSTALLED.search(p)
    if own >= 0 or m:
        parts = [x for x in p[own + 1 if own >= 0 else m.end():].split("/") if x]
        return "/".join(parts[:2]) if parts else path
    parts = [x for x in p.split("/") if x and x != "…"]
    return "/".join(parts[-2:]) if parts else path
