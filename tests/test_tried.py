"""What a hostile file tried beyond its run is said in its report's `tried` row and its triage row's `tried` field:
a file it read outside its run (beyond what this machine lends every run: the system's, Python's, the tool's), a
signal to its parent, a connect. A real run of a file that does all three; and a read its run's walls hid, which the
runner keeps as tried where this machine has the file."""
from __future__ import annotations

import json

import pytest

from diagnose.triage.rows import row_of
from tests.conftest import FIXTURES, cli


@pytest.mark.e2e
def test_a_file_that_reads_outside_signals_its_parent_and_connects_is_said_to_have_tried_all_three(tmp_path):
    outside, out = tmp_path / "outside", tmp_path / "out"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET\n")
    sub = tmp_path / "reaches_out.py"
    sub.write_text((FIXTURES / "triage_hostile" / "reaches_out.py").read_text().replace("__OUTSIDE__", str(outside)))
    # the folder is lent in place (DIAGNOSE_SHARE): under a run's private /tmp it would not be there to read at all
    # its attempts are made at import: a compile step and the test stage, no probe (`check`'s benchmark and leaderboard
    # ran the same import twice more, about 15 s of CPU)
    res = cli("run", sub, "--probes", "none", "--stages", "compile,test", "--budget", "60", "--out", out,
              env={"DIAGNOSE_SHARE": str(outside)})
    # it passes, and reads this machine's file (inconclusive, exit 1): what is checked here is what it tried
    assert res.returncode in (0, 1) and "Traceback" not in res.stdout + res.stderr, res.stdout + res.stderr
    session = json.loads((out / "session.json").read_text())
    tried = session["harness"]["container"]["tried"]
    want = [f"read {outside / 'secret.txt'}", "SIGCONT to its parent (the harness)", "connect to ('127.0.0.1', 9)"]
    assert all(x in tried for x in want), tried
    row = [x for x in (out / "report.md").read_text().splitlines() if x.startswith("| tried |")]
    assert len(row) == 1 and "secret.txt" in row[0] and "SIGCONT to its parent" in row[0], row
    assert "connect to ('127.0.0.1', 9)" in row[0], row
    triaged = row_of({"report_dir": str(out), "shown": "reaches_out.py", "key": "k"}, {}, res.returncode, res.stdout,
                     res.stderr, 1.0, None)
    assert all(x in triaged.tried for x in want), triaged.tried


@pytest.mark.parametrize("there", [True, False])
def test_a_read_its_walls_hid_is_tried_only_where_this_machine_has_that_file(tmp_path, there):
    """A jail whose file system holds only what it lends (no file of this machine's outside it) refuses the read;
    the worker still says it tried (worker/state.py), and the runner keeps it where this machine has that file: an
    attempt, never state the run read."""
    from diagnose.runs.runner.stage_facts import state_of
    secret = tmp_path / "secret.txt"
    if there:
        secret.write_text("SECRET\n")
    rec = state_of([{"k": "state", "op": "read", "path": str(secret), "inside": False, "missing": True}])
    assert rec["outside"] == []       # nothing was read: the run depends on nothing of this machine's
    assert rec.get("reached", []) == ([f"read {secret} (not there in its run)"] if there else [])
