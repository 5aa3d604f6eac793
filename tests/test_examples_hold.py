"""Every report committed under reports/examples, measured on a GPU, still stands: each of its claims is borne
out by the session's own runs (the audit), and today's renderer writes the committed report.md byte for byte.
An example concluded by an older version, or a folder that a pass over the examples missed (the diagnosis nested
below bisect-round9 once was), fails here by name."""
from __future__ import annotations

import json

import pytest

from diagnose.analysis.audit.audit import audit_claims
from diagnose.output import markdown
from diagnose.session import Session
from tests.conftest import ROOT

EXAMPLES = ROOT / "reports" / "examples"
SESSIONS = sorted(EXAMPLES.rglob("session.json"))


def test_the_examples_are_there():
    assert len(SESSIONS) >= 60 and (EXAMPLES / "bisect-round9" / "diagnosis" / "session.json") in SESSIONS


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: str(p.parent.relative_to(EXAMPLES)))
def test_each_example_passes_the_audit_and_renders_as_committed(path):
    session = Session.from_dict(json.loads(path.read_text(encoding="utf-8")))
    checked, loose = audit_claims(session)
    unsupported = [f"{c.key}: {f.rule}: {f.missing}" for c, found in checked for f in found] + list(map(str, loose))
    assert not unsupported, unsupported
    report = path.parent / "report.md"
    if report.is_file():
        assert markdown.render(session) == report.read_text(encoding="utf-8")
