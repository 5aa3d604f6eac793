"""No sentence is cut (issue 47): text is shortened in one place, findings.clip, which cuts at a clause end or
after a whole word and says so with " (…)"; an output's, a traceback's or stacks' end is kept by output.text.tail,
from a line's start, saying how much was left out above. Every other slice that shortens something in the code
that writes reports, console lines and triage rows is named here with why it is no cut sentence (a list's first
items, a parse). And no committed example, rendered as a report or as console lines, holds a word cut before its
stop."""
from __future__ import annotations

import ast
import io
import json
import random
import re
from pathlib import Path

import pytest
from rich.console import Console

from diagnose.findings import CUT, clip
from diagnose.output import console, markdown
from diagnose.session import Session
from probes import door
from probes.door import static_risks
from tests.conftest import ROOT


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _cut_mid_word(text: str, got: str) -> bool:
    kept = got[:-len(CUT)] if got.endswith(CUT) else ""
    return bool(kept) and _word(kept[-1]) and _word(text[len(kept)])


def test_clip_never_cuts_mid_word_and_always_says_it_cut():
    rng = random.Random(47)
    alphabet = "abcdefghij ,.;:()/_-é0123456789\n`…"
    for _ in range(4000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        limit = rng.randint(len(CUT), 100)
        got = clip(text, limit)
        if len(text) <= limit:
            assert got == text
            continue
        assert len(got) <= limit and (got.endswith(CUT) or got == CUT.strip()), (text, limit, got)
        assert text.startswith(got[:-len(CUT)]) and not _cut_mid_word(text, got), (text, limit, got)


def test_clip_prefers_a_clause_end_and_keeps_the_sentence_that_was_cut_before():
    why = ("cannot pin the searches left their choice nowhere a later call reads it at module level (a local, or an "
           "object the module does not hold)")
    assert clip(why, 500) == why
    assert clip(why, 60) == "cannot pin the searches left their choice nowhere a (…)"
    assert clip("first clause; a second one that is long", 30) == "first clause (…)"
    assert clip("x" * 50, 10) == "(…)"          # one long word: none of it, rather than half of it


# Every other slice that shortens text or a list, by file: what it takes, and why it is no cut sentence.
SLICED = {
    "diagnose/analysis/causes/bisector.py": {"fixing[:1]", "by[p][:1]"},                 # the first run of each
    "diagnose/analysis/verdict/carried.py": {"shown[:3]", "paths[:3]"},                   # "... and N more"
    "diagnose/analysis/effects/effect_lines.py": {"text[:1]"},                            # a tag's one character
    "diagnose/analysis/verdict/hotspots.py": {"sorted(lines.items(), key=lambda kv: -kv[1])[:TOP]"},    # the top lines
    "diagnose/analysis/causes/not_looked.py": {"a[:2]", "out[:2]"},                     # an option's name; argv's head
    "diagnose/analysis/causes/unfixed.py": {"runs[:8]"},                                 # "and N more toggle(s)"
    "diagnose/output/console.py": {'claims.by_kind(cl, "cause")[:3]', "lines[-1:]"},   # top causes; quiet's line
    "diagnose/output/md_public.py": {"body[:-1]", "lines[:2]"},                   # a fold's lines
    # torch's recompile reasons (evidence): marking the cut re-renders the committed recompile-storm examples
    "diagnose/output/md_stages.py": {"sorted(reasons)[:10]", "x[:200]"},
    "diagnose/output/md_state.py": {"rows[:15]", "out_w[:10]", "spawned[:10]", "dropped[:12]"},   # table rows
    "diagnose/output/public.py": {"rest[:len(rest) - tail]"},                     # a path less its full stop
    # code spans of the submission's text: marking the cut re-renders nine committed examples (see text.py)
    "diagnose/output/text.py": {'" ".join(str(text).split())[:limit]', "parts[:2]", "where[:3]", "parts[-2:]",
                                "text[-limit:]"},                                 # a path's parts; tail() itself
    "diagnose/facts/measures.py": {'key[: -len("mean")]'},                        # a report key's stem
}
# ...and each probe's, as its package says them (its EXPECTED["sliced"], probes/spec.py): adding a probe touches its
# package alone
SLICED.update({f"probes/{name}/{file}": slices for name in door.names()
               for file, slices in door.value(name, "EXPECTED", {}).get("sliced", {}).items()})
WRITERS = sorted({*ROOT.glob("diagnose/output/*.py"), *ROOT.glob("diagnose/analysis/**/*.py"),
                  *ROOT.glob("diagnose/facts/*.py"), ROOT / "diagnose/triage/rows.py", *ROOT.glob("probes/**/*.py")})


def _slices(path: Path) -> set[str]:
    """Each `x[:n]` and `x[-n:]` in a file, as written."""
    src = path.read_text(encoding="utf-8")
    out = set()
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Slice) and n.slice.step is None and (
                (n.slice.lower is None) != (n.slice.upper is None)):
            low = n.slice.lower
            if n.slice.upper is not None or (isinstance(low, ast.UnaryOp) and isinstance(low.op, ast.USub)):
                out.add(ast.get_source_segment(src, n))
    return out


def test_nothing_is_shortened_but_through_clip_or_a_named_slice():
    found = {str(p.relative_to(ROOT)): got for p in WRITERS if (got := _slices(p))}
    unnamed = {f: sorted(got - SLICED.get(f, set())) for f, got in found.items() if got - SLICED.get(f, set())}
    assert not unnamed, f"shorten text with findings.clip, or name the slice in SLICED with why: {unnamed}"
    assert len(WRITERS) > 50 and "diagnose/output/console.py" in found      # the check sees what it checks
    stale = sorted(f for f in SLICED if not (ROOT / f).is_file())
    assert not stale and "probes/search/watch.py" in SLICED, stale      # each probe's names a file it holds


EXAMPLES = sorted((ROOT / "reports" / "examples").rglob("session.json"))
CUT_WORD = re.compile(r"\w \.(\s|$)")        # "nowhere a later ." : a sentence cut, then its stop


def _console(items) -> str:
    out = Console(file=io.StringIO(), width=400, color_system=None, legacy_windows=False)
    for item in items:
        out.print(item)
    return out.file.getvalue()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.parent.relative_to(ROOT / "reports" / "examples")))
def test_no_example_holds_a_cut_sentence(path):
    s = Session.from_dict(json.loads(path.read_text(encoding="utf-8")))
    lines, _ = console.check_lines(s, static_risks(s.scan), s.submission.get("path", ""), gpu=True)
    text = markdown.render(s) + _console(console.run_summary(s, "report.md") + lines)
    bad = [line for line in text.splitlines() if CUT_WORD.search(line)]
    assert not bad, bad
