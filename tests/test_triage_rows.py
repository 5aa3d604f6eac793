"""A triage row is a Row (triage/rows.py): every committed example's ledger line read into one and written back is
the same JSON, key for key and byte for byte, and its tables render as they were committed. A line from before a
key reads that key as None and is written back without it; a key a Row does not know (the line's signature) is
ignored, as every reader of a row ignored it."""
from __future__ import annotations

import json
import re

import pytest

from diagnose.output.triage import csv_text, markdown
from diagnose.triage.rows import FIELDS, Row
from tests.conftest import ROOT

LEDGERS = sorted((ROOT / "reports" / "examples").glob("triage-*/**/triage.jsonl"))


def test_there_are_examples_to_read():
    assert len(LEDGERS) >= 6, LEDGERS


@pytest.mark.parametrize("ledger", LEDGERS, ids=lambda p: str(p.parent.relative_to(ROOT / "reports" / "examples")))
def test_every_example_row_reads_and_writes_back_the_same(ledger):
    lines = ledger.read_text().splitlines()
    for line in lines:
        raw = json.loads(line)
        raw.pop("sig", None)
        row = Row.from_dict(json.loads(line))
        assert json.dumps(row.to_dict()) == json.dumps(raw)          # the same keys, in the same order
        assert Row.from_dict(row.to_dict()) == row
    rows = [Row.from_dict(json.loads(x)) for x in lines]
    assert csv_text(rows) == (ledger.parent / "triage.csv").read_text()


def test_the_tables_of_a_ledger_render_as_committed():
    """triage-forgers was rendered by today's tables (the older examples' causes were worded by older versions)."""
    folder = ROOT / "reports" / "examples" / "triage-forgers"
    rows = [Row.from_dict(json.loads(x)) for x in (folder / "triage.jsonl").read_text().splitlines()]
    md = (folder / "triage.md").read_text()
    head = md.splitlines()
    total = int(re.match(r"\d+ of (\d+)", head[2]).group(1))
    assert markdown(rows, total, title=head[0][2:], cost=head[4] if head[4].startswith("Dask") else "") == md


def test_a_missing_key_reads_as_none_and_an_unknown_one_is_ignored():
    old = {"file": "a.py", "key": "k", "status": "crash", "class": "crash", "sig": "0" * 64, "later": [1]}
    row = Row.from_dict(old)
    assert (row.file, row.status, row.cause_class, row.line, row.tried, row.command_s) == \
        ("a.py", "crash", "crash", None, None, None)
    assert Row.from_dict({k: v for k, v in old.items() if k not in ("sig", "later")}) == row
    # every FIELDS key written, as null where missing; the keys said only sometimes, not at all
    assert list(row.to_dict()) == list(FIELDS) and row.to_dict()["line"] is None
    assert "| [a.py]" not in markdown([row], 1) and "| a.py | crash |  |  |  |  |  |  |" in markdown([row], 1)
    # a report unread beside a session read: its digest written as null, as rows.py always wrote it
    digested = Row.from_dict({**old, "session_sha256": "s", "report_sha256": None, "tried": ["x"]})
    d = digested.to_dict()
    assert d["report_sha256"] is None and d["tried"] == ["x"] and digested.tried == ("x",)
    assert list(d)[len(FIELDS):] == ["tried", "session_sha256", "report_sha256"]
