"""A triage of files that attack it, each beside a healthy file and a crashing one, over a real Dask cluster: every
run is jailed (runs/jail.py), so what a file does ends at its own run. A file that forges the crashing file's row
and report changes neither (resumed too); a file that SIGINTs its parent and its group, SIGKILLs every process
naming diagnose or Dask and connects to every port it finds listening stops nothing but itself; every other row
is what it would be without them, and the hostile rows say what they tried.

Each task is a `run` of a compile step and the test stage with no probe (`--depth run`): the same jail as each of
`check`'s stages, every attack made at import or at each call, in a third of the processes (tests/test_boundary.py
does the same; `check`'s own rows over Dask are tests/test_triage.py's)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, cli

pytestmark = pytest.mark.e2e
HOSTILE = FIXTURES / "triage_hostile"
EARLIER_KEY = b"EARLIER-KEY-" + b"k" * 20
SECRET600 = "SECRET-600: root's alone\n"
# `check` ran each passing file's benchmark and leaderboard too: about 60 s of CPU that no assertion here reads (the
# same settings again resume the same keys)
DEPTH = ["--depth", "run", "--stages", "compile,test", "--probes", "none", "--budget", "60", "--workers", "2"]


def _rows(out: Path) -> dict[str, dict]:
    rows = [json.loads(x) for x in (out / "triage.jsonl").read_text().splitlines() if x.strip()]
    return {Path(r["file"]).name: r for r in rows}


# its tests share one xdist_group: under --dist loadgroup one worker runs them all, so this is built once
@pytest.fixture(scope="module")
def triaged(tmp_path_factory):
    root = tmp_path_factory.mktemp("boundary")
    subs, out, tmp = root / "subs", root / "out", root / "tmp"
    subs.mkdir()
    tmp.mkdir()
    shutil.copy(FIXTURES / "healthy.py", subs / "healthy.py")
    shutil.copy(FIXTURES / "raises.py", subs / "raises.py")
    shutil.copy(HOSTILE / "killer.py", subs / "killer.py")
    # an earlier triage's ledger and key, and a file of root's alone, outside the home directory: a reader of
    # them (and of the other files' sources) must read nothing
    earlier = root / "earlier"
    earlier.mkdir()
    (earlier / ".triage-key").write_bytes(EARLIER_KEY)
    (earlier / ".triage-key").chmod(0o600)
    (earlier / "triage.jsonl").write_text('{"file": "old.py", "status": "ok", "why": "EARLIER-ROW"}\n')
    secret = root / "secret600.txt"
    secret.write_text(SECRET600)
    secret.chmod(0o600)
    (subs / "reader.py").write_text((HOSTILE / "reader.py").read_text().replace("__SUBS__", str(subs.resolve()))
                                    .replace("__EARLIER__", str(earlier.resolve()))
                                    .replace("__SECRET__", str(secret.resolve())))
    # the forger is told where the out folder is: a file that guessed it right must still reach nothing
    (subs / "forger.py").write_text((HOSTILE / "forger.py").read_text().replace("__OUT__", str(out.resolve())))
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])      # a loaded machine, as in CI
    try:
        t0 = time.monotonic()
        res = cli("triage", "subs", "--out", "out", *DEPTH, env={"TMPDIR": str(tmp)}, cwd=root)
        first = time.monotonic() - t0
    finally:
        busy.kill()
        busy.wait()
    return res, root, out, tmp, first


@pytest.mark.xdist_group("triage_boundary-triaged")
def test_every_file_gets_its_own_row_and_the_triage_ends_normally(triaged):
    res, _, out, _, _ = triaged
    assert res.returncode == 1, res.stdout + res.stderr       # raises.py crashed: not every file passed
    assert "interrupted" not in res.stderr and "Traceback" not in res.stdout + res.stderr, res.stderr
    assert "5 of 5 done" in res.stdout, res.stdout
    rows = _rows(out)
    assert sorted(rows) == ["forger.py", "healthy.py", "killer.py", "raises.py", "reader.py"]
    assert len((out / "triage.jsonl").read_text().splitlines()) == 5      # nothing appended but the five rows
    assert rows["healthy.py"]["status"] == "ok", rows["healthy.py"]
    assert rows["raises.py"]["status"] == "crash" and "unsupported shape" in rows["raises.py"]["why"]


@pytest.mark.xdist_group("triage_boundary-triaged")
def test_the_forger_reached_neither_the_ledger_nor_a_report(triaged):
    _, _, out, _, _ = triaged
    rows = _rows(out)
    assert rows["forger.py"]["status"] == "ok", rows["forger.py"]       # it computes correctly: only its attempts fail
    for name in ("raises.py", "healthy.py"):
        report = (out / rows[name]["report"] / "report.md").read_text()
        assert report.startswith("# diagnose") and "forged" not in report
    raises = json.loads((out / rows["raises.py"]["report"] / "session.json").read_text())
    assert raises["verdict"]["status"] == "crash"


@pytest.mark.xdist_group("triage_boundary-triaged")
def test_the_killer_ends_only_its_own_run_and_its_row_says_what_it_tried(triaged):
    _, _, out, _, _ = triaged
    killer = _rows(out)["killer.py"]
    # its last attempt, SIGINT to its own group, reaches its own process as it would in KernelBot's container: the
    # harness's pool worker dies at import, and the stage waits for it to its timeout (the tool says so)
    assert killer["status"] in ("timeout", "crash") and "KeyboardInterrupt" in (killer["why"] or ""), killer
    session = json.loads((out / killer["report"] / "session.json").read_text())
    tried = " ".join(session["harness"]["container"].get("tried") or [])
    assert "SIGINT to its parent (the harness)" in tried and "SIGKILL to its parent" in tried, tried
    assert "connect to ('127.0.0.1', 8786)" in tried, tried
    assert "SIGINT to process group" in tried, tried


@pytest.mark.xdist_group("triage_boundary-triaged")
def test_a_resume_trusts_only_the_rows_it_wrote(triaged):
    res, root, out, tmp, first = triaged
    before = (out / "triage.jsonl").read_text()
    res = cli("triage", "subs", "--out", "out", *DEPTH, env={"TMPDIR": str(tmp)}, cwd=root)
    assert res.returncode == 1 and "5 already done" in res.stdout and "0 to run" in res.stdout, res.stdout
    assert (out / "triage.jsonl").read_text() == before
    assert _rows(out)["raises.py"]["status"] == "crash"


@pytest.mark.xdist_group("triage_boundary-triaged")
def test_the_reader_read_no_other_files_source_no_earlier_ledger_and_no_file_of_roots(triaged):
    _, _, out, _, _ = triaged
    reader = _rows(out)["reader.py"]
    # it raises with whatever it read: `ok` means it read nothing (the triage's inputs, an earlier triage's key and
    # rows, a mode-600 file outside home, /etc/shadow), and nothing it could have read is anywhere in the out folder
    assert reader["status"] == "ok", (reader["status"], reader.get("why"))
    written = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != ".triage-key")
    for secret in (EARLIER_KEY, b"EARLIER-ROW", SECRET600.encode()):
        assert secret not in written, secret
