"""A report is fit for a public ticket: it names no path of this machine, its stacks are the submission's
threads and not the tool's, it has no table without a value, and its first screen is the verdict, the
causes, the fix and its diff, with the long evidence folded. Real runs under an odd HOME and TMPDIR, and
hand-built sessions."""
import json
import os
import re
import sys

import pytest

from diagnose.analysis.audit import claims
from diagnose.findings import FixCost
from diagnose.output import RENDERERS
from diagnose.session import Session
from tests.conftest import FIXTURES, cli
from tests.test_renderers import healthy_session, interaction_session

# Starts a thread of its own, prints where it runs (its file, its directory, HOME, TMPDIR, the Python
# installation), then waits in custom_kernel until the deadline
HANGS = '''import json, os, sys, tempfile, threading, time
print("at", __file__, os.getcwd(), os.path.expanduser("~"), tempfile.gettempdir(), sys.prefix, sys.base_prefix,
      json.__file__, file=sys.stderr, flush=True)


def _helper():
    while True:
        time.sleep(0.05)


def custom_kernel(data):
    threading.Thread(target=_helper, daemon=True).start()
    while True:
        time.sleep(0.05)  # WAIT-LINE
'''
TOOL_THREADS = ("diagnose/runs/worker/watchdog.py", "diagnose/runs/worker/sampler.py",
                "diagnose/runs/worker/instrument.py")


def _real_home() -> str | None:
    import pwd
    home = os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir)
    return home if home != "/" else None


# its tests share one xdist_group: under --dist loadgroup one worker runs them all, so this is built once
@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    """Two diagnoses under a HOME and a TMPDIR no report could name by chance: the fixture that raises, and a
    submission that hangs with a thread of its own, given by a relative path."""
    root = tmp_path_factory.mktemp("public")
    home, tmp, src = root / "h0me-ODD", root / "tmpODDdir", root / "src"
    for d in (home, tmp, src):
        d.mkdir()
    (src / "hangs.py").write_text(HANGS)
    env = {"HOME": str(home), "TMPDIR": str(tmp)}
    out = {}
    for name, args in (("raises", [FIXTURES / "raises.py"]), ("hangs", ["hangs.py", "--budget", "5"])):
        res = cli("run", *args, "--stages", "test", "--probes", "none", "--out", root / name, env=env,
                  cwd=src if name == "hangs" else None)
        assert res.returncode == 1, res.stdout + res.stderr
        out[name] = ((root / name / "report.md").read_text(), (root / name / "session.json").read_text(),
                     (root / name / "trace.json").read_text())
    return home, tmp, out


@pytest.mark.xdist_group("public_report-odd")
@pytest.mark.e2e
def test_a_report_names_no_path_of_this_machine(odd):
    home, tmp, out = odd
    places = {str(home), os.path.realpath(home), str(tmp), os.path.realpath(tmp), sys.prefix, sys.base_prefix,
              os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    real = _real_home()
    for name, (md, raw, trace) in out.items():
        assert str(tmp) in raw, name              # the session keeps what the runs said, paths and all
        for text in (md, trace):
            left = [p for p in places if p in text]
            assert not left, (name, left)
            assert not re.search(r"diagnose-\d+-[a-z0-9_]+", text), name
            if real:
                assert not re.search(rf"(?<![\w.~/-]){re.escape(real)}(?![\w.-])", text), (name, real)
    md = out["raises"][0]
    assert 'File "tests/fixtures/raises.py", line 6, in custom_kernel' in md     # as it was given
    md = out["hangs"][0]
    assert 'File "hangs.py", line 14 in custom_kernel' in md
    assert "<python>/lib/python" in md and "<container>/work" in md and "<container>/home" in md
    assert "`HOME=~`" in md and "`TMPDIR=$TMPDIR`" in md


@pytest.mark.xdist_group("public_report-odd")
@pytest.mark.e2e
def test_the_stacks_are_the_submissions_threads_not_the_tools(odd):
    md, raw, _ = odd[2]["hangs"]
    stacks = json.loads(raw)["runs"][0]["stages"][0]["stacks"]
    assert all(t in stacks for t in TOOL_THREADS), stacks        # the dump had them
    shown = md.split("Stacks when the process was stopped", 1)[1].split("stderr (tail):", 1)[0]
    assert not [t for t in TOOL_THREADS if t in shown], shown
    assert "in _helper" in shown and "in custom_kernel" in shown     # the main thread and the one it started
    left = re.search(r"Left out above: (\d+) thread\(s\) of diagnose's own worker", shown)
    assert left and int(left[1]) % 3 == 0, shown               # three per dump: watchdog, sampler, metrics


def _tables(md: str) -> list[list[list[str]]]:
    out, rows = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif rows:
            out.append(rows)
            rows = []
    return out


def test_no_table_has_only_na_in_it():
    s = interaction_session()
    s.fix.steady_us = None
    s.fix.costs = [FixCost(run=c.run, probe=c.probe, toggle=c.toggle, steady_us=None, per_case_us={}, delta_us=None)
                   for c in s.fix.costs]
    md = RENDERERS["md"](s)
    tables = _tables(md)
    assert tables and not [t for t in tables if all(c in ("n/a", "—", "") for r in t[2:] for c in r[1:])], md
    assert "_No value to show (steady µs, vs this fix): every row's was n/a, so the table is left out._" in md
    assert "| run | variant | outcome |" in md          # a table with n/a in some cells stays


FOLDED = ("## Evidence per run", "## Timeline", "## Stages of the baseline run", "## Compile metrics",
          "## Environment")


@pytest.mark.parametrize("make", [interaction_session, healthy_session])
def test_the_first_screen_is_verdict_causes_fix_and_diff_and_the_evidence_is_folded(make):
    s = make()
    md = RENDERERS["md"](s)
    first = md.split("<details>", 1)[0]
    assert "## Verdict" in first and "## Ranked causes" in first
    if s.fix:
        assert "## Verified fix" in first and "```diff" in first
    lines = md.splitlines()
    for head in FOLDED:
        at = lines.index(head)
        assert lines[at + 2].startswith("<details><summary>") and lines[at + 2].endswith("</summary>"), head
    depth = 0
    for line in lines:                   # every block closed, none closed before it opened
        depth += line.startswith("<details>") - (line == "</details>")
        assert depth >= 0
    assert depth == 0
    flat = re.sub(r"[\s`]+", " ", md)
    for c in claims.derive(s):           # every claim stated as a sentence still is, word for word
        if c.kind in ("verdict", "cause", "cleared", "inconclusive", "fix", "measure"):
            assert re.sub(r"[\s`]+", " ", c.text)[1:] in flat, c
    again = Session.from_dict(json.loads(RENDERERS["json"](s)))
    assert RENDERERS["md"](s) == md == RENDERERS["md"](again)


def test_the_places_a_session_records_are_shown_as_placeholders_in_code_and_prose():
    """Places the CLI records (a TMPDIR with a space in it, a Python outside any home), in a stack and in a
    sentence: prose gets each renamed path whole in a code span, so `<container>` never reads as HTML."""
    s = interaction_session()
    s.harness["container"]["places"] = {"root": "/scr atch/diagnose-7-abcdefgh", "python": ["/opt/py311"],
                                        "home": "/home/alice", "tmpdir": "/scr atch"}
    st = s.baseline.failed_stage
    st.stacks = ('Thread 0x00007f (most recent call first):\n'
                 '  File "/scr atch/diagnose-7-abcdefgh/r0/work/submission.py", line 7 in custom_kernel\n'
                 '  File "/opt/py311/lib/python3.11/threading.py", line 1 in run\n')
    s.warnings = [{"kind": "host_busy", "message": "read /home/alice/.cache/x and /scr atch/diagnose-7-abcdefgh/r0."}]
    md = RENDERERS["md"](s)
    assert "/scr atch" not in md and "/opt/py311" not in md and "/home/alice" not in md, md
    assert 'File "kernels/sub.py", line 7 in custom_kernel' in md and '"<python>/lib/python3.11/threading.py"' in md
    assert "read `~/.cache/x` and `<container>`." in md
