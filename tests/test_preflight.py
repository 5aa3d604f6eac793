"""A run that cannot start is diagnose's failure, never the submission's (engine/preflight.py): before the first run
of the submission a run's worker is started alone (torch, the device, the reference), and where it cannot start,
`run` and `check` end in one line, no report: exit 3 for a package the worker's Python lacks, naming it, the
interpreter and what to run; 70 for anything else. And a run whose worker never reached the submission proves
nothing (analysis/verdict/started.py): the analysis draws no cause from it, and the audit rejects one drawn from it."""
from __future__ import annotations

import importlib.metadata as md
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from diagnose.analysis.audit.audit import audit
from diagnose.analysis.causes import bisector
from diagnose.analysis.verdict import summary
from diagnose.session import Phase, StageResult
from diagnose.status import Status
from tests.builders import run, session
from tests.conftest import FIXTURES, ROOT
from tests.test_audit import all_crash_session

SAID = "the worker failed before the stage: ModuleNotFoundError: No module named 'torch'"


def _never_reached(rid, probe=None, toggle=None):
    """A run whose test stage died in torch's import, as a Python without torch leaves it (main.py's setup)."""
    r = run(rid, probe, toggle, outcome="crash", fail_at="test")
    st = r.failed_stage
    st.phase, st.message, st.site, st.exit_code = "torch_import", SAID, None, 3
    st.phases = [Phase("torch_import", 0.0, 0.2, open=True, ok=False)]
    st.events = [{"k": "worker_error", "type": "ModuleNotFoundError", "message": "No module named 'torch'"}]
    return r


def _runs():
    return [_never_reached("r0"), _never_reached("r1", "warmup", "warmup N->1"),
            _never_reached("r2", "compile_mode", "compile off")]


def test_the_analysis_draws_no_cause_from_runs_that_never_reached_the_submission():
    s = session(_runs())
    bisector.minimal_set(s, ["warmup", "compile_mode"], fails=lambda keep: True)
    bisector.conclude(s)
    s.verdict = summary.verdict(s)
    assert s.causes == [] and s.cleared == [] and s.fix is None, [c.narrative for c in s.causes]
    assert s.verdict.status == Status.INCOMPLETE, s.verdict
    assert "r0 never reached the submission" in s.verdict.message and "No module named 'torch'" in s.verdict.message
    assert audit(s) == [], [str(f) for f in audit(s)]


def test_a_variant_that_never_reached_the_submission_clears_nothing():
    from tests.test_renderers import interaction_session
    s = interaction_session()
    assert "warmup" in {c.probe for c in s.cleared}           # r3 crashed where r0 did: warmup is not the cause
    s.runs[3] = _never_reached("r3", "warmup", "warmup N->1")
    bisector.conclude(s)
    assert "warmup" not in {c.probe for c in s.cleared}
    why = next(i.reason for i in s.inconclusive if i.probe == "warmup")
    assert "never reached the submission" in why, why
    assert audit(s) == [], [str(f) for f in audit(s)]


def _as_drawn_before():
    """The causes and the CRASH verdict the tool drew before it knew better (issue 53: "a bug in the code itself"),
    over runs that all died in torch's import."""
    s = all_crash_session()
    assert s.causes and s.verdict.status == Status.CRASH
    s.runs = _runs()
    return s


def test_the_audit_rejects_a_cause_drawn_from_a_run_that_never_reached_the_submission():
    found = {(f.rule, f.claim) for f in audit(_as_drawn_before())}
    assert ("reached-submission", "cause 1") in found and ("reached-submission", "verdict") in found, found


def test_report_audit_names_it(tmp_path, capsys):
    path = tmp_path / "drawn-before.json"      # not session.json: conftest audits every one a test leaves
    path.write_text(_as_drawn_before().to_json())
    code, out, err = _in_process(capsys, "report", path, "--audit")
    assert code == 1, out + err
    assert "UNSUPPORTED cause 1 (runs r0" in out, out
    assert "[reached-submission] r0 never reached the submission: its worker failed in torch_import" in out, out


def _in_process(capsys, *args) -> tuple[int, str, str]:
    from diagnose.cli.app import main
    with pytest.raises(SystemExit) as ended:
        main([str(a) for a in args])
    got = capsys.readouterr()
    return ended.value.code, got.out, got.err


def _start_fails(tmp_path, error: dict) -> str:
    """A scripted runner whose baseline's first process fails in torch's import with `error`, as every run's
    would; every other run passes (none may start)."""
    start = StageResult(name="test", status=Status.CRASH, phase="torch_import", exit_code=3,
                        message=f"the worker failed before the stage: {error['type']}: {error['message']}",
                        phases=[Phase("torch_import", 0.0, 0.2, open=True, ok=False)],
                        events=[{"k": "worker_error", **error}])
    ok = [StageResult(name=n, status=Status.OK) for n in ("test", "benchmark", "leaderboard")]
    plain = lambda st: json.loads(json.dumps(asdict(st), default=str))  # noqa: E731
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"start_check": True, "runs": [{"match": {"role": "baseline"},
                                                               "stages": [plain(start)]}],
                                "default": [plain(st) for st in ok]}))
    return f"scripted:{path}"


@pytest.mark.parametrize("cmd", ["run", "check"])
@pytest.mark.parametrize("error,code,said", [
    # a package this Python lacks: this machine cannot judge (3), and the line says where to install it
    ({"type": "ModuleNotFoundError", "message": "No module named 'package_not_installed_here'"}, 3,
     "has no 'package_not_installed_here'"),
    # torch, which this Python has, out of the worker's reach: the run's container hid it, a fault of ours (70)
    ({"type": "ModuleNotFoundError", "message": "No module named 'torch'"}, 70,
     "a run's worker cannot import 'torch', which the Python that runs diagnose has"),
    # anything else before the submission: ours (70)
    ({"type": "OSError", "message": "libcudart.so.12: cannot open shared object file"}, 70,
     "could not start here, before any line of the submission ran: torch_import: OSError: libcudart.so.12"),
])
def test_a_run_that_cannot_start_ends_in_one_line_and_no_report(tmp_path, capsys, cmd, error, code, said):
    out = tmp_path / "o"
    got, stdout, stderr = _in_process(capsys, cmd, FIXTURES / "healthy.py", "--runner", _start_fails(tmp_path, error),
                                      "-o", out)
    lines = [x for x in stderr.splitlines() if x.strip()]
    assert got == code and len(lines) == 1, (got, stdout, stderr)
    assert said in lines[0] and sys.executable in lines[0] and f"sys.prefix {sys.prefix}" in lines[0], lines[0]
    assert lines[0].startswith("CANNOT JUDGE HERE: " if code == 3 else "error: internal error"), lines[0]
    if code == 3:
        assert f"install it into that interpreter: {sys.executable} -m pip install package_not_installed_here" \
            in lines[0], lines[0]
    assert not out.exists()                    # no report, and no folder left behind that held none
    assert "cause" not in stdout + stderr and "Traceback" not in stdout + stderr


# --- for real: a Python without torch ------------------------------------------------------------------------

def _deps(names: list[str]) -> dict[str, Path]:
    """The top-level entries (package folders, modules, .dist-info) of these distributions and what they need,
    as this Python has them; never torch."""
    from packaging.requirements import Requirement
    seen, todo, out = set(), list(names), {}
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen or key == "torch":
            continue
        seen.add(key)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        todo += [r.name for r in map(Requirement, dist.requires or []) if r.marker is None or
                 r.marker.evaluate({"extra": ""})]
        for top in {Path(f).parts[0] for f in dist.files or []} - {"..", "__pycache__"}:
            src = Path(dist.locate_file(top))
            if src.exists():
                out.setdefault(top, src)
    return out


@pytest.fixture
def no_torch_python(tmp_path) -> Path:
    """A virtual environment whose Python reaches diagnose (the checkout, through a .pth) and its dependencies, each
    linked from this Python's, but no torch."""
    venv, deps = tmp_path / "venv", tmp_path / "deps"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    deps.mkdir()
    for top, src in _deps(["typer", "rich", "psutil", "pyyaml", "numpy"]).items():
        (deps / top).symlink_to(src)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "diagnose-checkout.pth").write_text(f"{ROOT}\n{deps}\n")
    python = venv / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import diagnose.cli.app, importlib.util as u; "
                                               "print(u.find_spec('torch') is None)"], capture_output=True, text=True)
    assert probe.stdout.strip() == "True", probe.stdout + probe.stderr
    return python


@pytest.mark.e2e
def test_without_torch_run_and_check_say_so_in_one_line_exit_3(tmp_path, no_torch_python):
    for cmd, extra in (("run", ["--stages", "test"]), ("check", [])):
        out = tmp_path / f"out-{cmd}"
        res = subprocess.run([str(no_torch_python), "-m", "diagnose", cmd, "examples/warmup_timeout.py", "--budget",
                              "20", *extra, "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=300)
        both = res.stdout + res.stderr
        named = [x for x in both.splitlines() if "torch" in x]
        assert res.returncode == 3 and len(named) == 1, (cmd, res.returncode, both)
        assert named[0].startswith("CANNOT JUDGE HERE: ") and "has no 'torch'" in named[0], named[0]
        assert str(no_torch_python) in named[0] and "-m pip install torch" in named[0], named[0]
        assert "cause" not in both and "Traceback" not in both and not out.exists(), both
        if cmd == "check":      # a triage row of this check: inconclusive, and why is that line
            from diagnose.triage.rows import row_of
            row = row_of({"report_dir": str(out), "shown": "warmup_timeout.py", "key": "k"}, {}, res.returncode,
                         res.stdout, res.stderr, 1.0, None)
            assert row.status == "inconclusive" and row.why.startswith("CANNOT JUDGE HERE: "), row
            assert "has no 'torch'" in row.why, row
