"""`check` runs no probe, so it looks for no cause (issue 47): on a wrong result it names the failure and where it
happened, says its cause was not looked for, and gives the `diagnose run` command that would look; it never says
what probes found. A real `diagnose check` on tests/fixtures/wrong.py, its session, its report, its audit, and the
triage row made from it."""
import json
import re

import pytest

from diagnose.status import NOT_LOOKED
from diagnose.triage.rows import row_of
from tests.conftest import FIXTURES, ROOT, cli

pytestmark = pytest.mark.e2e     # every test here starts real processes

PROBES = re.compile(r"probe found|strateg|toggle|in that code itself|cleared|not the cause", re.I)
RUN = "`diagnose run tests/fixtures/wrong.py --budget 60` would look for it"


def test_check_on_a_wrong_result_names_where_it_failed_and_that_its_cause_was_not_looked_for(tmp_path):
    out = tmp_path / "o"
    res = cli("check", FIXTURES / "wrong.py", "--budget", "60", "-o", out, "-v", timeout=300)
    assert res.returncode == 1 and res.stdout.strip().splitlines()[-1] == "FAILS (wrong)", res.stdout + res.stderr
    s = json.loads((out / "session.json").read_text())
    assert s["probes"] == [] and not s["causes"] and not s["cleared"] and s["fix"] is None
    (said,) = s["inconclusive"]
    where = "The submission returned a wrong result in test (check:"
    assert said["probe"] == NOT_LOOKED and said["reason"].startswith(where), said
    assert "at tests/fixtures/wrong.py line 9, where custom_kernel returns" in said["reason"]
    assert said["reason"].endswith("its cause was not looked for (no probe ran): " + RUN), said["reason"]
    assert said["site"]["line"] == 9 and said["site"]["code"] == "return (r1 * r2).half()"
    # the console's last lines and the report's top say the same, and nothing of what probes found
    statement = next(line for line in res.stdout.splitlines() if line.startswith(where))
    assert statement == said["reason"] + "."
    report = (out / "report.md").read_text()
    top = next(line for line in report.splitlines() if line.startswith("- **Top cause:**"))
    assert top == f"- **Top cause:** not looked for. {said['reason']}."
    assert "- **Verified fix:** none: no probe ran, so no variant was tried." in report
    for text in (res.stdout, report, json.dumps(s["inconclusive"])):
        assert not PROBES.search(text.replace("no probe ran", "")), PROBES.search(text)
    audit = cli("report", out / "session.json", "--audit")
    assert audit.returncode == 0 and "ok          the cause was not looked for (runs r0" in audit.stdout, audit.stdout
    # the triage row of that check: its cause is that statement, its line the file's
    row = row_of({"report_dir": str(out), "shown": "tests/fixtures/wrong.py", "key": "k"}, {}, 1, res.stdout,
                 res.stderr, 5.0, None)
    assert (row.status, row.cause_class, row.line, row.cause) == ("wrong", "wrong", 9, said["reason"]), row
    assert str(ROOT) not in said["reason"]        # the file as the report names it, not as this machine holds it
