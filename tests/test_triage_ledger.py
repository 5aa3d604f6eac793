"""The triage's ledger (triage/ledger.py, its files written by cli/ledger_file.py): only rows its controller signed are
believed on resume; the key is its own file, made once, never in a row; a report changed since its task read it is
shown as such. Also `triage`'s checks before any work: no Dask here, and bad option values, each one line and exit
2."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from diagnose.cli.ledger_file import LedgerFile as Ledger
from diagnose.errors import BadInput
from diagnose.triage.ledger import JSONL, KEY_FILE, rerun, sign
from diagnose.triage.rows import Row
from tests.conftest import FIXTURES, ROOT, cli


def _row(key: str, status: str = "crash", **more) -> Row:
    return Row.from_dict({"file": f"{key}.py", "key": key, "status": status, "class": status, "report": None,
                          "wall_s": 1.5, "exit_code": 1, **more})


def test_rows_are_signed_with_a_key_of_their_own_and_forged_ones_are_counted_and_ignored(tmp_path):
    ledger = Ledger(tmp_path)
    assert ledger.done() == ({}, None)
    ledger.append(_row("a"))
    ledger.append(_row("b", report=Path("reports/b")))       # a Path is signed as the string it is read as
    key = (tmp_path / KEY_FILE).read_bytes()
    assert len(key) == 32 and stat.S_IMODE((tmp_path / KEY_FILE).stat().st_mode) == 0o600
    text = (tmp_path / JSONL).read_text()
    assert key.hex() not in text and all("sig" in json.loads(x) for x in text.splitlines())
    done, note = Ledger(tmp_path).done()
    assert set(done) == {"a", "b"} and note is None and done["b"].report == "reports/b"

    # what a run could write: a row that says its crashing file passed, unsigned, signed wrongly, or re-signed
    # by a key of its own; and a line cut short
    forged = _row("a", "ok").to_dict()
    real_b = json.loads(text.splitlines()[1])
    with open(tmp_path / JSONL, "a") as fh:
        fh.write(json.dumps(forged) + "\n")
        fh.write(json.dumps({**forged, "sig": "0" * 64}) + "\n")
        fh.write(json.dumps({**forged, "sig": sign(os.urandom(32), forged)}) + "\n")
        fh.write(json.dumps({**real_b, "status": "ok"}) + "\n")     # its real signature, another status
        fh.write('{"key": "a", "status": "o')
    done, note = Ledger(tmp_path).done()
    assert done["a"].status == "crash" and done["b"].status == "crash"
    assert note == ("triage: 4 row(s) in triage.jsonl were not written by a triage here (no valid signature): "
                    "ignored, their files are checked again")

    # no key: no row is believed, whoever wrote it
    (tmp_path / KEY_FILE).unlink()
    done, note = Ledger(tmp_path).done()
    assert done == {} and "6 row(s) in triage.jsonl but no key (.triage-key) to check them by" in note
    # the next key is a new one, made with O_EXCL: the old rows stay unbelieved
    fresh = Ledger(tmp_path)
    fresh.append(_row("c"))
    done, note = Ledger(tmp_path).done()
    assert set(done) == {"c"} and note.startswith("triage: 6 row(s)")


def test_a_key_file_that_is_not_a_key_is_bad_input(tmp_path):
    (tmp_path / "elsewhere").write_bytes(os.urandom(32))
    (tmp_path / KEY_FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(BadInput, match="cannot read this triage's key"):
        Ledger(tmp_path).key()
    (tmp_path / KEY_FILE).unlink()
    (tmp_path / KEY_FILE).write_bytes(b"short")
    (tmp_path / JSONL).write_text(json.dumps(_row("a").to_dict()) + "\n")
    with pytest.raises(BadInput, match="not a triage key"):
        Ledger(tmp_path).done()


def test_rows_that_say_nothing_about_the_submission_are_run_again():
    assert rerun(Row(status="lost")) and rerun(Row(status="inconclusive", exit_code=143))
    assert not rerun(Row(status="crash", exit_code=1))


def test_a_report_changed_since_its_task_read_it_is_linked_with_a_note(tmp_path):
    import hashlib

    from diagnose.output.triage import markdown
    report = tmp_path / "reports" / "x"
    report.mkdir(parents=True)
    (report / "report.md").write_text("# the task's own\n")
    digest = hashlib.sha256(b"# the task's own\n").hexdigest()
    rows = [Row(file="x.py", key="k", status="crash", cause_class="crash", report="reports/x", report_sha256=digest)]
    ledger = Ledger(tmp_path)
    assert ledger.changed_reports(rows) == set()
    assert "[x.py](reports/x/report.md) |" in markdown(rows, 1, changed=ledger.changed_reports(rows))
    (report / "report.md").write_text("# written by something else\n")
    changed = ledger.changed_reports(rows)
    assert changed == {"k"}
    assert "[x.py](reports/x/report.md) (report changed since its task wrote it) |" in markdown(rows, 1,
                                                                                               changed=changed)
    (report / "report.md").unlink()
    assert ledger.changed_reports(rows) == {"k"}
    assert ledger.changed_reports([replace(rows[0], report_sha256=None)]) == {"k"}


_NO_DASK = """
import sys
class NoDask:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("dask", "distributed"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NoDask())
from diagnose.cli.app import main
main(sys.argv[1:])
"""


@pytest.mark.e2e
def test_without_dask_triage_says_what_to_install_in_one_line(tmp_path):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-c", _NO_DASK, "triage", str(FIXTURES / "raises.py"), "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "triage needs Dask" in r.stderr, r.stderr
    assert "pip install 'diagnose[triage]'" in r.stderr and "internal error" not in r.stderr
    assert not out.exists()                 # before any work


@pytest.mark.e2e
@pytest.mark.parametrize("args, says", [
    (["--budget", "0"], "--budget must be a finite positive number, got 0"),
    (["--compile-budget", "-3"], "--compile-budget must be a finite positive number, got -3"),
    (["--budget", "nan"], "--budget must be a finite positive number, got nan"),
    (["--depth", "deep"], "--depth must be check or run, got 'deep'"),
    (["--workers", "0"], "--workers must be at least 1, got 0"),
])
def test_bad_option_values_are_one_line_before_any_cluster(tmp_path, args, says):
    out = tmp_path / "out"
    res = cli("triage", FIXTURES / "raises.py", "--out", out, *args, timeout=60)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and says in res.stderr, res.stderr
    assert not out.exists() and res.stdout == ""
