"""`check` ends in exactly one word, each with its own exit code (cli/exits.py): SAFE (PASSED ON CPU), AT RISK,
FAILS, INCONCLUSIVE, INTERRUPTED, CANNOT JUDGE HERE. Its first line says what it resolved. A bug of ours in a
renderer or a probe's figures never loses the runs. The progress lines say which clock they show."""
import io
import json
import re
from dataclasses import asdict, replace

import pytest

from diagnose.cli import exits
from diagnose.session import Role, Run, StageResult
from diagnose.status import Status
from tests.builders import stage
from tests.conftest import FIXTURES, ROOT, cli

HERE = FIXTURES / "interrupt"
BOARDS = "tests/fixtures/problems_root"        # as a user in the checkout would name it: relative


def _script(tmp_path, stages, name="script.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"default": [json.loads(json.dumps(asdict(s), default=str)) for s in stages]}))
    return f"scripted:{path}"


def _last(stdout: str) -> str:
    return stdout.strip().splitlines()[-1]


# --- a failure is a failure ---------------------------------------------------------------------------------

@pytest.mark.e2e
@pytest.mark.parametrize("status", ["crash", "wrong", "tampered"])
def test_every_failure_the_harness_reports_fails_with_exit_1(tmp_path, status):
    failed = stage("test", status, wall=3, budget=180, message=f"planted {status}")
    res = cli("check", FIXTURES / "healthy.py", "--runner", _script(tmp_path, [failed]), "-o", tmp_path / "o",
              timeout=120)
    assert res.returncode == 1, res.stdout + res.stderr
    assert _last(res.stdout).startswith(f"FAILS ({status}"), res.stdout
    assert "AT RISK" not in res.stdout and "SAFE" not in res.stdout and "PASSED" not in res.stdout


def _timed_out(lost: bool = False):
    from diagnose.analysis.verdict import summary
    from tests.builders import run, session
    s = session([run("r0", outcome="timeout", fail_at="test", walls=(5.0, 12.0))])
    if lost:        # the evaluator's pool worker died: the harness waits out its budget wherever it runs
        s.baseline.stage("test").lost_worker = {"how": "signal SIGSEGV", "phase": "first_call:256x512x256"}
    s.harness["cpu_cap_s"] = 12.0
    s.verdict = summary.verdict(s)
    return s


def test_a_timeout_fails_on_a_gpu_and_on_a_cpu_is_no_judgment_unless_the_pool_worker_died():
    """On a GPU a timeout is KernelBot's: FAILS. On a CPU check a stage runs up to a cap instead of its budget, and
    one the cap stopped never reached the end of its checks: time decides nothing there, so INCONCLUSIVE (exit 5),
    never FAILS. A pool worker that died is no matter of time: FAILS on a CPU too."""
    from diagnose.output.console import Word, check_lines
    lines, word = check_lines(_timed_out(), [], "sub.py", gpu=True)
    assert word == Word.FAILS and str(lines[-1]).endswith("FAILS[/] (timeout)"), lines
    lines, word = check_lines(_timed_out(), [], "sub.py", gpu=False)
    assert word == Word.INCONCLUSIVE and exits.check_exit(word) == 5, lines
    assert "test did not finish within this CPU's 12 s cap" in str(lines[-1]), lines
    assert any("up to 12 s instead of its budget" in str(x) for x in lines), lines
    lines, word = check_lines(_timed_out(lost=True), [], "sub.py", gpu=False)
    assert word == Word.FAILS, lines


@pytest.mark.e2e
@pytest.mark.parametrize("name,args,status", [
    ("raises.py", [], "crash"),
    ("wrong.py", [], "wrong"),
])
def test_a_real_crash_and_wrong_answer_fail_check(tmp_path, name, args, status):
    res = cli("check", FIXTURES / name, *args, "-o", tmp_path / "o", timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    assert _last(res.stdout).startswith(f"FAILS ({status}"), res.stdout
    assert "AT RISK" not in res.stdout
    assert json.loads((tmp_path / "o" / "session.json").read_text())["verdict"]["status"] == status


@pytest.mark.e2e
def test_on_a_cpu_a_correct_file_passes_its_checks_whatever_its_budget_and_a_hang_is_no_judgment(tmp_path):
    """Without a GPU no time decides anything: each stage runs to its checks up to a cap, not its budget. The plainest
    correct kernel under a 0.5 s budget (each stage takes longer on a CPU: its process starts torch) is PASSED ON CPU,
    exit 0; a file that sleeps an hour a call reaches the cap (--cpu-cap, 10 s here) and is INCONCLUSIVE, exit 5,
    never FAILS."""
    out = tmp_path / "o"
    res = cli("check", FIXTURES / "healthy.py", "--budget", "0.5", "-o", out, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _last(res.stdout).startswith("PASSED ON CPU"), res.stdout
    assert "each stage ran to its checks, up to 300 s instead of its budget" in res.stdout, res.stdout
    s = json.loads((out / "session.json").read_text())
    stages = s["runs"][0]["stages"]
    assert [(st["name"], st["status"], st["budget_s"]) for st in stages] == \
        [("test", "ok", 0.5), ("benchmark", "ok", 0.5), ("leaderboard", "ok", 0.5)], stages
    assert max(st["charged_s"] for st in stages) > 0.5      # ran past its budget: the budget stopped nothing
    res = cli("check", FIXTURES / "interrupt" / "sleeps.py", "--budget", "2", "--cpu-cap", "10", "-o",
              tmp_path / "o2", timeout=300)
    assert res.returncode == 5, res.stdout + res.stderr
    assert _last(res.stdout).startswith("INCONCLUSIVE (timeout): test did not finish within this CPU's 10 s cap")
    assert "FAILS" not in res.stdout


@pytest.mark.e2e
def test_every_word_has_its_own_code_defined_once():
    from diagnose.output.console import Word
    codes = {str(w): exits.check_exit(w, 2) for w in Word}
    assert set(exits.CHECK) == {w.value for w in Word}
    assert codes == {"SAFE": 0, "PASSED ON CPU": 0, "FAILS": 1, "CANNOT JUDGE HERE": 3, "AT RISK": 4,
                     "INCONCLUSIVE": 5, "INTERRUPTED": 130}
    assert exits.check_exit(Word.INTERRUPTED, 15) == 143
    # the help and the README list the same table
    for cmd in ([], ["check"], ["run"]):
        shown = cli(*cmd, "--help").stdout
        for code, check, _ in exits.TABLE:
            assert re.search(rf"^\s+{code}\s+{re.escape(check)}", shown, re.M), (cmd, code, shown)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- exits:[^\n]*-->\n(.*?)<!-- /exits -->", readme, re.S).group(1)
    assert block == exits.markdown()


def test_a_pass_with_a_thin_margin_is_at_risk_exit_4():
    from diagnose.analysis.verdict import summary
    from diagnose.output.console import Word, check_lines
    from tests.builders import run, session
    s = session([run("r0", walls=(9.0, 9.0, 9.0), budgets={"compile": 10.0, "test": 10.0, "benchmark": 10.0})])
    s.verdict = summary.verdict(s)
    lines, word = check_lines(s, [], "sub.py", gpu=True)
    assert word == Word.AT_RISK and exits.check_exit(word) == 4, lines


# --- only a run that ended on its own result is judged ------------------------------------------------------

def test_a_bug_of_ours_on_the_submissions_run_is_inconclusive_never_a_pass(tmp_path, monkeypatch, capsys):
    """The runner fails (a bug of ours) when the benchmark stage starts: the test stage passed, the rest never
    ran. Not PASSED ON CPU: INCONCLUSIVE, exit 5, saying why; the session is kept."""
    from diagnose.runs.runner.scripted import ScriptedRunner
    real = ScriptedRunner.execute

    def broken(self, job, on_stage, stop):
        if "benchmark" in job.stages:
            raise RuntimeError("planted bug in the runner")
        return real(self, job, on_stage, stop)
    monkeypatch.setattr(ScriptedRunner, "execute", broken)
    code, out, err = _in_process(capsys, "check", FIXTURES / "healthy.py", "--runner",
                                 _script(tmp_path, [stage("test", wall=3, budget=180)]), "-o", tmp_path / "o")
    assert code == 5, out + err
    assert _last(out).startswith("INCONCLUSIVE") and "planted bug in the runner" in _last(out), out
    assert "PASSED" not in out and "SAFE" not in out
    assert json.loads((tmp_path / "o" / "session.json").read_text())["verdict"]["status"] == "incomplete"


@pytest.mark.e2e
@pytest.mark.parametrize("args,env,name", [(["--cpu-cap", "0"], {}, "--cpu-cap"),
                                           ([], {"DIAGNOSE_CPU_CAP": "abc"}, "DIAGNOSE_CPU_CAP")])
def test_a_bad_cpu_cap_is_one_error_line_before_anything_runs(tmp_path, args, env, name):
    res = cli("check", FIXTURES / "healthy.py", *args, "-o", tmp_path / "o", env=env, timeout=120)
    assert res.returncode == 2 and name in res.stderr and "error:" in res.stderr, res.stdout + res.stderr
    assert not (tmp_path / "o").exists() and "check:" not in res.stdout


@pytest.mark.e2e
def test_cannot_judge_here_prints_no_empty_table_first(tmp_path):
    needs = stage("test", "needs_gpu", wall=3, budget=180, message="CUDA is not available on this machine")
    res = cli("check", FIXTURES / "healthy.py", "--runner", _script(tmp_path, [needs]), timeout=120)
    assert res.returncode == 3, res.stdout + res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith("check: ") and lines[-1].startswith("CANNOT JUDGE HERE")
    assert not any(c in res.stdout for c in "┏┃└"), res.stdout


# --- check says what it resolved ----------------------------------------------------------------------------

@pytest.mark.e2e
def test_the_first_line_names_the_leaderboard_the_folder_and_every_budget(tmp_path):
    sub = tmp_path / "submission.py"
    sub.write_text("#!POPCORN leaderboard doubling\n" + (FIXTURES / "problems" / "subs" / "double_ok.py").read_text())
    res = cli("check", sub, "--problems-root", BOARDS, "--runner", _script(tmp_path, []), "-o", tmp_path / "o",
              timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    first = res.stdout.splitlines()[0]
    assert first == (f"check: {sub} · leaderboard doubling (practice.yaml) · folder tests/fixtures/problems/doubling"
                     f" · budgets: test 30 s, benchmark 60 s, leaderboard 60 s; compile step 120 s"), first
    assert str(ROOT) not in first      # the folder as named under the root the user gave, not where it lies here
    # triage's row of this check names the leaderboard the header resolved (an H100 triage once had it empty)
    from diagnose.triage.rows import row_of
    row = row_of({"report_dir": str(tmp_path / "o"), "shown": "submission.py", "key": "k"}, {}, 0, res.stdout, "",
                 1.0, None)
    assert (row.leaderboard, row.problem, row.status) == ("doubling", "doubling", "ok"), row


# --- a bug of ours never loses the runs ---------------------------------------------------------------------

def _in_process(capsys, *args) -> tuple[int, str, str]:
    from diagnose.cli.app import main
    with pytest.raises(SystemExit) as ended:
        main([str(a) for a in args])
    got = capsys.readouterr()
    return ended.value.code, got.out, got.err


def test_a_probes_figures_that_raise_cost_only_a_line(tmp_path, monkeypatch, capsys):
    import probes.warmup.probe

    def boom(session):
        raise TypeError("planted figures bug")
    monkeypatch.setattr(probes.warmup.probe, "INFO", replace(probes.warmup.probe.INFO, figures=boom))
    out = tmp_path / "o"
    code, stdout, stderr = _in_process(capsys, "check", FIXTURES / "healthy.py", "--runner",
                                       _script(tmp_path, []), "-o", out)
    assert code == 0, stdout + stderr          # the diagnosis's own code (PASSED ON CPU), not 70
    assert _last(stdout).startswith("PASSED ON CPU")
    said = [ln for ln in stderr.splitlines() if "a bug in diagnose" in ln]
    assert len(said) == 1 and "warmup's figures" in said[0], stderr
    s = json.loads((out / "session.json").read_text())
    assert s["runs"] and s["verdict"]["status"] == "ok"
    failed = next(c for c in s["claims"] if c["key"] == "warmup figures failed")
    assert "planted figures bug" in failed["text"]
    assert "warmup probe's figures could not be derived (a bug in diagnose): TypeError" in \
        (out / "report.md").read_text()


def test_a_renderer_that_raises_leaves_the_session_and_a_note(tmp_path, monkeypatch, capsys):
    from diagnose.output import RENDERERS

    def boom(session, cl=None):
        raise TypeError("planted renderer bug")
    monkeypatch.setitem(RENDERERS, "md", boom)
    out = tmp_path / "o"
    code, stdout, stderr = _in_process(capsys, "run", FIXTURES / "healthy.py", "--runner", _script(tmp_path, []),
                                       "-p", "none", "-o", out)
    assert code == 0, stdout + stderr
    said = [ln for ln in stderr.splitlines() if "a bug in diagnose" in ln]
    assert len(said) == 1 and "report.md: TypeError: planted renderer bug" in said[0], stderr
    assert json.loads((out / "session.json").read_text())["runs"]
    assert (out / "trace.json").exists()
    report = (out / "report.md").read_text()
    assert report.startswith("# diagnose: healthy.py: OK")
    assert "The report renderer failed (a bug in diagnose): TypeError: planted renderer bug; session.json holds " \
        "every run" in report


def test_session_json_holds_the_raw_runs_when_its_own_renderer_fails(tmp_path, monkeypatch):
    from diagnose.cli.files import FILES, save_all
    from diagnose.output import RENDERERS
    from tests.test_renderers import healthy_session

    def boom(session, cl=None):
        raise KeyError("claims")
    monkeypatch.setitem(RENDERERS, "json", boom)
    out = tmp_path / "o"
    failed = save_all(out, healthy_session())
    assert failed == ["session.json: KeyError: 'claims'"]
    s = json.loads((out / "session.json").read_text())
    assert s["runs"] and "claims_error" in s and sorted(p.name for p in out.iterdir()) == sorted(FILES)


# --- progress: which clock a line shows ---------------------------------------------------------------------

def _plain():
    from diagnose.cli.progress import PlainProgress
    stream = io.StringIO()
    return PlainProgress({"test": 60.0}, lambda: 3, stream), stream


def test_a_stage_line_never_shows_ok_past_its_budget_without_saying_which_clock():
    p, stream = _plain()
    st = StageResult(name="test", status=Status.OK, wall_s=61.2, charged_s=58.0, budget_s=60.0)
    p.stage_done(Run(id="r4", probe="warmup", toggle="N -> 1", role=Role.SINGLE), st)
    line = stream.getvalue()
    assert "test ok in 58.0 s charged (61.2 s wall, 3.2 s waiting for the GPU) of 60 s" in line, line
    assert "ok in 61.2 s of 60 s" not in line


def test_a_run_that_never_started_is_not_counted_as_done():
    p, stream = _plain()
    ran = [StageResult(name="test", status=Status.OK, wall_s=3)]
    p.on_run_done(Run(id="r0", probe=None, outcome=Status.OK, stages=ran))
    p.on_run_done(Run(id="r2", probe=None, outcome=Status.INTERRUPTED,
                      note="not run: the diagnosis was interrupted"))
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("r0 done: ok (1 of 3 runs done")
    assert lines[1].startswith("r2 never started: not run: the diagnosis was interrupted (1 of 2 runs done, 1 never "
                               "started"), lines
    assert "left" in lines[0] and "left" not in lines[1]      # once stopped, no estimate of what is left
