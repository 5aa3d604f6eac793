"""What `run` and `check` print when piped (as in CI): plain lines, no colour codes, no wrapping, in the
order things finish. Checked against expected text with the measured numbers masked."""
import re

from tests.conftest import FIXTURES, ROOT, cli

GOLDEN = ROOT / "tests" / "golden"


def _masked(text: str, out) -> str:
    text = text.replace(str(out), "<OUT>")
    return re.sub(r"\d+(?:\.\d+)?", "<n>", text)


def test_piped_run_prints_plain_lines_as_expected(tmp_path):
    out = tmp_path / "o"
    res = cli("run", FIXTURES / "healthy.py", "-p", "none", "-s", "compile,test", "-b", "60", "-o", out,
              env={"CI": "", "COLUMNS": "40"})
    assert res.returncode == 0, res.stderr
    assert "\x1b[" not in res.stdout + res.stderr
    got = _masked(res.stderr + "---\n" + res.stdout, out)
    assert got == (GOLDEN / "piped_run.txt").read_text()
    # never wrapped at COLUMNS=40: the stage lines are longer than that, and still one line each
    assert any(len(line) > 40 for line in res.stderr.splitlines())


def test_piped_check_quiet_prints_only_the_verdict(tmp_path):
    res = cli("check", FIXTURES / "hostile" / "returns_none.py", "-b", "30", "-q")
    assert res.returncode == 1
    assert res.stdout.strip().splitlines() == ["AT RISK (wrong)"]
    assert res.stderr == ""
