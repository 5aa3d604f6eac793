"""Every renderer on hand-built sessions, and golden files for the Markdown and JSON.

Regenerate the goldens after an intended change with UPDATE_GOLDEN=1 and review the diff.
"""
import json
import os
from pathlib import Path

import pytest

from diagnose import bisector, summary
from diagnose.renderers import RENDERERS
from tests.builders import run, session

GOLDEN = Path(__file__).parent / "golden"
US = {"256x4096x7168": 100.0, "512x4096x7168": 120.0}


def interaction_session():
    s = session([run("r0", outcome="crash", fail_at="test", site={"file": "/tmp/x/submission.py", "line": 7,
                                                                   "func": "custom_kernel"}),
                 run("r1", "graph_capture", "capture off", per_call_us={k: v * 1.5 for k, v in US.items()}),
                 run("r2", "compile_mode", "same mode, no CUDA graphs", per_call_us=US),
                 run("r3", "warmup", "warmup N->1", outcome="crash", fail_at="test")])
    bisector.analyze(s, removers=["graph_capture", "compile_mode", "warmup"],
                     fails=lambda keep: {"graph_capture", "compile_mode"} <= set(keep))
    s.verdict = summary.verdict(s)
    return s


def healthy_session():
    s = session([run("r0", per_call_us=US)])
    bisector.analyze(s, removers=[], fails=None)
    s.verdict = summary.verdict(s)
    return s


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
@pytest.mark.parametrize("make", [interaction_session, healthy_session])
def test_every_renderer_renders_every_session(fmt, make):
    text = RENDERERS[fmt](make())
    assert text.endswith("\n") and len(text) > 200
    if fmt in ("json", "trace"):
        json.loads(text)


@pytest.mark.parametrize("name,make,fmt", [("interaction.md", interaction_session, "md"),
                                          ("interaction.json", interaction_session, "json"),
                                          ("healthy.md", healthy_session, "md")])
def test_golden(name, make, fmt):
    text = RENDERERS[fmt](make())
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_markdown_sections_come_in_the_ticket_order():
    md = RENDERERS["md"](interaction_session())
    order = ["## Verdict", "## Ranked causes", "## Verified fix", "## Evidence per probe", "## Timeline",
             "## Failure", "## Compile metrics", "## Environment", "## Reproduce"]
    pos = [md.index(h) for h in order]
    assert pos == sorted(pos)
    assert "graph_capture × compile_mode" in md and "```mermaid" in md and "```diff" in md
    assert "Verified not to be the cause" in md and "`warmup`" in md


def test_json_contract_fields():
    d = json.loads(RENDERERS["json"](interaction_session()))
    assert isinstance(d["schema_version"], int)
    assert set(d["verdict"]) >= {"status", "stage", "phase", "message", "site"}
    assert d["verdict"]["status"] == "crash" and d["verdict"]["site"]["line"] == 7
    r = d["runs"][0]
    assert r["probe"] is None and r["variant"] is None and r["outcome"] == "crash"
    assert {"name", "status", "wall_s", "phases"} <= set(r["stages"][0])
    assert {"name", "start_s", "end_s"} <= set(r["stages"][0]["phases"][0])
    c = d["causes"][0]
    assert set(c) >= {"rank", "suspects", "site", "changes_outcome", "seconds_saved", "confidence", "narrative"}
    assert set(d["fix"]) >= {"diff", "steady_us"}
    h = json.loads(RENDERERS["json"](healthy_session()))
    assert h["causes"] == [] and h["verdict"]["status"] == "ok" and h["fix"] is None
