"""report.md of `diagnose bisect`: the edits between GOOD and BAD, every tested combination as a row
(edits applied, decision, outcome, stage times), the minimal set as a diff, and where its diagnosis is."""
from __future__ import annotations

import difflib

from diagnose.output.text import code_span, fence
from diagnose.session import Session


def _diff(b: dict, ids: list[str]) -> str:
    lines = []
    for e in (x for x in b["edits"] if x["id"] in ids):
        lines += [f"# {e['id']} ({e['kind']}, GOOD line {e['good_lines'][0]})\n"]
        lines += difflib.unified_diff(e["good_text"].splitlines(keepends=True), e["bad_text"].splitlines(keepends=True),
                                      fromfile="a/good.py", tofile="b/bad.py", n=0)
    return "".join(x if x.endswith("\n") else x + "\n" for x in lines).rstrip()


def sections(s: Session) -> list[str]:
    b = s.edit_bisect
    ids = b["minimal"]
    out = ["## Bisect", ""]
    if ids:
        out += [f"The edits {', '.join(ids)} alone turn GOOD's pass into BAD's failure ({b.get('failure', b['want'])}; "
                f"run {b['minimal_run']}; "
                f"GOOD run {b['good_run']}, BAD run {b['bad_run']}). {b['runs']} runs, against {b['exhaustive']} for "
                f"every subset of the {len(b['edits'])} edits.", "", *fence(_diff(b, ids), "diff"), ""]
    else:
        out += [f"No minimal set of edits could be verified ({b['runs']} runs). GOOD run {b['good_run']}, BAD run "
                f"{b['bad_run']}.", ""]
    out += ["### Edits from GOOD to BAD", "", "| edit | kind | where | change | comes with |", "|---|---|---|---|---|"]
    out += [f"| {e['id']}{' **(minimal)**' if e['id'] in ids else ''} | {e['kind']} | {code_span(e['where'])} | "
            f"{code_span(e['summary'])} | {', '.join(e.get('needs', []))} |" for e in b["edits"]] + [""]
    out += ["### Tested combinations", "", "| edits applied | run | decision | outcome | stage seconds | note |",
            "|---|---|---|---|---|---|"]
    for r in b["rows"]:
        secs = ", ".join(f"{k} {v:.1f}" for k, v in (r.get("seconds") or {}).items())
        out.append(f"| {r['label']} | {r['run'] or '-'} | {r['decision'] or 'not decided'} | {r['outcome'] or '-'} | "
                   f"{secs} | {code_span(r['note']) if r['note'] else ''} |")
    return out + ["", "_Untestable: the combination did not parse, or its run broke on an edit alone (a name used "
                  "before the edit that defines it). It counts as neither a pass nor a failure._", ""]
