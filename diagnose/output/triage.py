"""A triage's tables, from its rows (triage/rows.py): Markdown grouped by cause class, with counts and a link to
each report, and CSV for spreadsheets. Pure: the CLI writes them."""
from __future__ import annotations

import csv
import io

from diagnose.findings import clip
from diagnose.triage.classes import order
from diagnose.triage.rows import FIELDS, Row

COLUMNS = ("file", "status", "stage / phase", "line", "cause or reason", "fix", "wall", "gpu")
STATUS_ORDER = ("timeout", "crash", "wrong", "at_risk", "refused", "inconclusive", "lost", "ok")


def counts(rows: list[Row]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        out[r.status] = out.get(r.status, 0) + 1
    return {k: out[k] for k in sorted(out, key=lambda s: STATUS_ORDER.index(s) if s in STATUS_ORDER else 99)}


def _cell(v) -> str:
    return ("" if v is None else str(v)).replace("|", "\\|").replace("\n", " ")


def markdown(rows: list[Row], total: int, title: str = "diagnose triage", cost: str = "",
             changed: set[str] | frozenset = frozenset()) -> str:
    """cost: triage/overhead.py's sentence on what Dask added, if this triage ran any task. changed: keys of the
    rows whose report.md is not the one their task read (triage/ledger.py): linked with a note saying so."""
    c = counts(rows)
    head = [f"# {title}", "", f"{len(rows)} of {total} submission(s): " +
            (", ".join(f"{n} {s}" for s, n in c.items()) or "none yet"), ""] + ([cost, ""] if cost else [])
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(r.cause_class or "inconclusive", []).append(r)
    out = head
    for cls in sorted(groups, key=lambda k: (order(k), k)):
        rs = sorted(groups[cls], key=lambda r: r.file)
        out += [f"## {cls} ({len(rs)})", "", "| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
        for r in rs:
            name = f"[{_cell(r.file)}]({_link(r.report + '/report.md')})" if r.report else _cell(r.file)
            if r.report and r.key in changed:
                name += " (report changed since its task wrote it)"
            where = " / ".join(x for x in (r.stage, r.phase) if x)
            # the cause: a statement's first sentence, whole (rows.py); the reason: a message, capped
            why = r.cause or clip(r.why or "", 160)
            wall = f"{r.wall_s:.0f} s" if isinstance(r.wall_s, (int, float)) else ""
            out.append(f"| {name} | {r.status} | {_cell(where)} | {_cell(r.line)} | {_cell(why)} | "
                       f"{_cell(r.fix)} | {wall} | {_cell(r.gpu)} |")
        out.append("")
    return "\n".join(out)


def csv_text(rows: list[Row]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(FIELDS), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in sorted(rows, key=lambda r: r.file):
        w.writerow(r.to_dict())
    return buf.getvalue()


def _link(target: str) -> str:
    """A link target as CommonMark takes it: one with a space or a parenthesis goes inside <...>."""
    return f"<{target}>" if any(c in target for c in " ()<>") else target
