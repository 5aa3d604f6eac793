"""Every renderer on hand-built sessions, and golden files for the Markdown and JSON.

Regenerate the goldens after an intended change with UPDATE_GOLDEN=1 and review the diff.
"""
import json
import os
from pathlib import Path

import pytest

from diagnose.analysis.causes import bisector
from diagnose.analysis.verdict import summary
from diagnose.output import RENDERERS
from diagnose.session import Role
from tests.builders import run, session

GOLDEN = Path(__file__).parent / "golden"
US = {"256x4096x7168": 100.0, "512x4096x7168": 120.0}


def interaction_session():
    s = session([run("r0", outcome="crash", fail_at="test", site={"file": "/tmp/x/submission.py", "line": 7,
                                                                   "func": "custom_kernel"}),
                 run("r1", "graph_capture", "capture off", per_call_us={k: v * 1.5 for k, v in US.items()}),
                 run("r2", "compile_mode", "same mode, no CUDA graphs", per_call_us=US),
                 run("r3", "warmup", "warmup N->1", outcome="crash", fail_at="test"),
                 # the bisector's combinations: the pair kept (warmup out) still crashes, all out passes
                 run("r4", "warmup", "keep graph_capture + compile_mode", outcome="crash", fail_at="test",
                     role=Role.COMBINATION),
                 run("r5", "compile_mode+graph_capture+warmup", "all suspects removed", role=Role.COMBINATION,
                     walls=(5, 10))])
    s.run("r4").removed, s.run("r5").removed = ["warmup"], ["compile_mode", "graph_capture", "warmup"]
    bisector.minimal_set(s, ["graph_capture", "compile_mode", "warmup"],
                    fails=lambda keep: {"graph_capture", "compile_mode"} <= set(keep))
    bisector.conclude(s)
    s.verdict = summary.verdict(s)
    return s


def healthy_session():
    s = session([run("r0", per_call_us=US)])
    bisector.minimal_set(s, [], fails=None)
    bisector.conclude(s)
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
    order = ["## Verdict", "## Ranked causes", "## Verified fix", "## Evidence per run", "## Timeline",
             "## Failure", "## Compile metrics", "## Environment", "## Reproduce"]
    pos = [md.index(h) for h in order]
    assert pos == sorted(pos)
    assert "graph_capture × compile_mode" in md and "```mermaid" in md and "```diff" in md
    assert "Verified not to be the cause" in md and "`warmup`" in md


def test_the_first_five_lines_carry_verdict_top_cause_and_fix():
    head = RENDERERS["md"](interaction_session()).splitlines()[:5]
    assert head[0].startswith("# diagnose: sub.py: CRASH")
    assert head[2].startswith("- **Verdict:** CRASH") and head[3].startswith("- **Top cause:** graph_capture")
    assert head[4].startswith("- **Verified fix:** ")


def test_mermaid_axis_is_milliseconds_with_millisecond_values():
    md = RENDERERS["md"](interaction_session())
    block = md.split("```mermaid\n", 1)[1].split("```", 1)[0].splitlines()
    assert "dateFormat x" in [b.strip() for b in block]
    bars = [b for b in block if ":" in b and "," in b and "Format" not in b]
    ends = [int(b.rsplit(",", 1)[1]) for b in bars]
    assert max(ends) == 5000      # the builders' first call ends 5 s into its stage: 5000 ms on the axis


def test_text_from_the_submission_cannot_break_the_markdown():
    s = interaction_session()
    s.verdict.message = "boom `x` [red]oops[/red] | pipe\nsecond line"
    md = RENDERERS["md"](s)
    line = next(ln for ln in md.splitlines() if ln.startswith("- **Verdict:**"))
    assert "``boom `x` [red]oops[/red] | pipe second line``" in line


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


def test_where_the_time_went_comes_between_the_causes_and_the_fix():
    from pathlib import Path

    from diagnose.session import Session
    root = Path(__file__).resolve().parent.parent
    s = Session.from_dict(json.loads((root / "reports" / "examples" / "round9" / "session.json").read_text()))
    md = RENDERERS["md"](s)
    heads = ("## Ranked causes", "## Where the time went", "## Verified fix", "## Evidence per run")
    pos = [md.index(h) for h in heads]
    assert pos == sorted(pos)


def test_a_folded_traceback_names_the_tools_own_frames_by_their_part_never_a_directory_above():
    from diagnose.output.text import fold_frames
    frames = [{"file": "/home/someone/x/site-packages/torch/_dynamo/eval_frame.py", "line": 1, "func": "f"},
              {"file": "/home/someone/tool/probes/graph_capture/hook.py", "line": 2, "func": "capture_begin"},
              {"file": "/home/someone/tool/diagnose/runs/worker/stages.py", "line": 3, "func": "stage_test"},
              {"file": "/work/sub/submission.py", "line": 9, "func": "custom_kernel"}]
    text = "\n".join(fold_frames(frames, "submission.py"))
    assert "probes/graph_capture" in text and "diagnose/runs" in text and "torch/_dynamo" in text, text
    other = [{"file": "/home/someone/x/site-packages/probes/util/io.py", "line": 4, "func": "g"}, frames[-1]]
    assert "probes/util" in "\n".join(fold_frames(other, "submission.py"))    # another package named probes
    assert "someone" not in text and "submission.py" in text
