"""Hostile and broken submissions, end to end through `diagnose run` and `diagnose check` (CPU).

For each: the verdict and message the user sees, a report on disk, no process of ours alive afterwards
(the autouse fixture, plus pid files for detached forks), and no temporary directory left behind.
"""
import glob
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from diagnose.cli.files import write_atomic
from tests.conftest import FIXTURES, ROOT, cli

H = FIXTURES / "hostile"

# fixture, status, stage, message fragment, line marker in the source (or None), also through `check`
CASES = [
    # the submission is imported and called in eval.py's pool worker: a worker that dies there (not an Exception
    # the pool hands back) leaves its task unanswered, and the harness's stage times out
    ("exit0_at_import.py", "timeout", "test", "SystemExit: 0 ended the evaluator's pool worker", "EXIT-LINE", False),
    ("raise_systemexit.py", "timeout", "test", "SystemExit ended the evaluator's pool worker", "EXIT-LINE", False),
    # the compile step before the stage fails the same way, and decides nothing: the stage's own import does
    ("os_exit_at_import.py", "timeout", "test", "exit code 3 ended the evaluator's pool worker", None, False),
    ("loop_at_import.py", "timeout", "test", "budget", "IMPORT-LOOP", True),
    ("segfault_at_import.py", "timeout", "test", "signal SIGSEGV ended the evaluator's pool worker", "SEGV-LINE",
     False),
    ("segfault_own_faulthandler.py", "timeout", "test", "signal SIGSEGV ended", "SEGV-LINE", False),
    ("sigkill_self.py", "timeout", "test", "signal SIGKILL ended the evaluator's pool worker", None, False),
    ("sleep_in_c.py", "timeout", "test", "budget", "SLEEP-LINE", False),
    ("deadlock.py", "timeout", "test", "budget", "DEADLOCK-LINE", False),
    ("main_hangs_helper_busy.py", "timeout", "test", "budget", "MAIN-LINE", False),   # the main thread's line
    ("fifo_stacks.py", "timeout", "test", "budget", "FIFO-LOOP", False),             # never blocks the tool
    ("ignores_stack_signal.py", "timeout", "test", "budget", "IGNORED-LINE", False),  # stacks without SIGUSR1
    ("returns_none.py", "wrong", "test", "expected a torch.Tensor, got NoneType", None, True),
    ("wrong_shape.py", "wrong", "test", "shape", None, False),
    ("wrong_dtype.py", "wrong", "test", "dtype torch.float32", None, False),
    ("nans.py", "wrong", "test", "NaN", None, False),
    ("deep_recursion.py", "crash", "test", "RecursionError", "RECURSE-LINE", False),
    # the exception goes back to eval.py, whose pool terminates the worker: its thread and atexit never hold it
    ("raise_beside_thread_forever.py", "crash", "test", "RuntimeError: the kernel failed", "RAISE-LINE", False),
    ("markup_message.py", "crash", "test", "[bold red]boom[/] in [/tmp/x] and [red]", "MARKUP-LINE", False),
    # the work finishes, but `python3` never exits: the compile step times out in interpreter_exit and the
    # harness ignores it; the stage's pool worker is terminated, as the harness's is
    ("thread_forever.py", "ok", None, "every stage passed", None, False),
    ("atexit_forever.py", "ok", None, "every stage passed", None, False),
    # forged verdicts and replaced judges
    ("forge_stage_done.py", "tampered", "test", "wrote a 'stage done' to the tool's channel", None, True),
    ("replace_checker.py", "tampered", "test", "reference.check_implementation was replaced", "TAMPER-LINE", True),
    ("replace_timer.py", "tampered", "test", "time.perf_counter was replaced", "TIMER-LINE", True),
    # valid code that Python runs, and hostility that must not change a passing verdict
    ("bom.py", "ok", None, "every stage passed", None, False),
    ("kernel_in_try.py", "ok", None, "every stage passed", None, False),
    ("kernel_via_globals.py", "ok", None, "every stage passed", None, False),
    ("deep_expression.py", "ok", None, "every stage passed", None, False),
    ("fork_child_exits.py", "ok", None, "every stage passed", None, False),
    ("garbage_events.py", "ok", None, "every stage passed", None, False),
    ("stop_parent.py", "ok", None, "every stage passed", None, True),
    # its grandchild inherited stdout: the harness waits for it to close, to the stage's deadline
    ("double_fork_empty_env.py", "timeout", "test", "stdout or stderr stayed open", None, False),
]
RUN_BUDGET, CHECK_BUDGET = 15, 20   # the failing cases fail at any budget; large against a loaded import (~3-8 s)
# Cases that also run the harness's compile step before the stage (under its own, shortened limit): those
# that fail at import or at exit, and every passing one.
WITH_COMPILE_STEP = {"os_exit_at_import.py", "loop_at_import.py", "segfault_at_import.py", "sigkill_self.py",
                     "thread_forever.py", "atexit_forever.py", "replace_timer.py"}
TOOL_LIMIT = 150                     # no case may hold the tool longer than this


def temp_dirs():
    """diagnose's temporary directories in this test's own TMPDIR (conftest gives each test one)."""
    return set(glob.glob(os.path.join(os.environ["TMPDIR"], "diagnose-*")))


@pytest.fixture
def no_temp_left():
    before = temp_dirs()
    yield
    assert temp_dirs() - before == set()


_PID_DIRS: list[Path] = []


def pid_file(name: str) -> Path:
    """Where a forking fixture writes its pids: outside every run's container, shared with the runs on purpose
    (DIAGNOSE_SHARE: /var/tmp is private to each run too). Removed when this module's tests are done."""
    d = Path(tempfile.mkdtemp(prefix="diagnose-test-pids-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    _PID_DIRS.append(d)
    return d / name


@pytest.fixture(scope="module", autouse=True)
def _remove_pid_dirs():
    yield
    import shutil
    for d in _PID_DIRS:
        shutil.rmtree(d, ignore_errors=True)


def survivors(pidfile: Path) -> list[int]:
    """The processes a fixture left that are still alive. Their pids in the file are numbers inside their run's own
    process space, which name nothing out here: they are found by the pid file's path in their command line or
    environment (PIDFILE), where each fixture puts it."""
    out = []
    for p in psutil.process_iter(["cmdline", "environ", "status"]):
        try:
            env = p.info["environ"] or {}
            named = str(pidfile) in (p.info["cmdline"] or []) or env.get("PIDFILE") == str(pidfile)
            if named and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except psutil.Error:
            continue
    return out


def marker_line(name, marker):
    return next(i for i, ln in enumerate((H / name).read_text().splitlines(), 1) if marker in ln)


def _one_case(root, case):
    """One fixture through `run` (and `check`), in a TMPDIR of its own; what a test then asserts on."""
    name, _status, _stage, _frag, _marker, gate = case
    d = root / name
    tmp = d / "tmp"
    tmp.mkdir(parents=True)
    pids = pid_file("pids")
    env = {"TMPDIR": str(tmp), "PIDFILE": str(pids), "DIAGNOSE_KEEP_ENV": "PIDFILE", "DIAGNOSE_SHARE": str(pids.parent)}
    digest = hashlib.sha256((H / name).read_bytes()).hexdigest()
    t0 = time.time()
    budget = RUN_BUDGET if case[1] != "ok" else 60     # passing cases: no load may time them out
    # the other cases need no compile step before them (one torch import less, per run and rerun)
    stages = "compile,test" if name in WITH_COMPILE_STEP or case[1] == "ok" else "test"
    run = cli("run", H / name, "--probes", "none", "--stages", stages, "--budget", budget,
              "--compile-budget", RUN_BUDGET, "--out", d / "run", env=env, timeout=TOOL_LIMIT)
    res = {"run": run, "run_s": time.time() - t0, "dir": d, "pids": pids}
    if gate:
        # a passing case keeps the default budgets: a CPU benchmark is slow, and says nothing about a GPU's; a failing
        # one stops at the same figure on this CPU (where a stage runs to a cap, not its budget)
        budget = ["--budget", CHECK_BUDGET, "--cpu-cap", CHECK_BUDGET] if case[1] != "ok" else []
        res["check"] = cli("check", H / name, *budget, "--compile-budget", RUN_BUDGET, "--out", d / "check", env=env,
                           timeout=TOOL_LIMIT)
    res["untouched"] = hashlib.sha256((H / name).read_bytes()).hexdigest() == digest
    res["temp_left"] = sorted(os.listdir(tmp))
    return name, res


# its tests share one xdist_group: under --dist loadgroup one worker runs them all, so this is built once
@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Every case at once, four at a time: most of them sleep or hang against their budget, so the
    suite costs about a quarter of their sum (the budgets stay large against torch's import, ~3 s)."""
    root = tmp_path_factory.mktemp("hostile")
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(lambda c: _one_case(root, c), CASES))


@pytest.mark.xdist_group("hostile-outcomes")
@pytest.mark.e2e
@pytest.mark.parametrize("name,status,stage,fragment,marker,gate", CASES)
def test_verdict_no_traceback_nothing_left(outcomes, name, status, stage, fragment, marker, gate):
    res = outcomes[name]
    run = res["run"]
    assert run.returncode == (0 if status == "ok" else 1), run.stdout + run.stderr
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout
    s = json.loads((res["dir"] / "run" / "session.json").read_text())
    v = s["verdict"]
    assert (v["status"], v.get("stage")) == (status, stage), v
    assert fragment in v["message"], v["message"]
    if fragment == "did not exit":
        assert v["phase"] == "interpreter_exit"
    if marker:
        assert v["site"] and v["site"]["line"] == marker_line(name, marker), v
    assert (res["dir"] / "run" / "report.md").read_text().startswith("# diagnose")
    assert (res["dir"] / "run" / "session.json").stat().st_size < 2 << 20     # evidence is bounded
    if gate:
        chk = res["check"]
        # a stage the CPU's cap stopped never reached its checks' end: no time decides anything there
        assert chk.returncode == {"ok": 0, "timeout": 5}.get(status, 1), chk.stdout + chk.stderr
        # without a GPU a pass is never called SAFE: CPU timings say nothing about a GPU budget
        assert ("PASSED ON CPU" in chk.stdout) == (status == "ok") and "SAFE" not in chk.stdout
        assert "Traceback" not in chk.stderr
        assert json.loads((res["dir"] / "check" / "session.json").read_text())["verdict"]["status"] == status
    assert res["untouched"]
    assert res["temp_left"] == []
    alive = survivors(res["pids"])
    assert alive == [], f"detached processes survived: {alive}"


@pytest.mark.xdist_group("hostile-outcomes")
@pytest.mark.e2e
@pytest.mark.parametrize("name,marker", [("thread_forever.py", "THREAD-LINE"), ("atexit_forever.py", "ATEXIT-LINE")])
def test_a_script_that_never_exits_only_costs_its_compile_step(outcomes, name, marker):
    """`python3 submission.py` finishes its work and never exits: the harness's compile step times out in
    interpreter_exit and is ignored; the stage after it passes."""
    s = json.loads((outcomes[name]["dir"] / "run" / "session.json").read_text())
    step = s["runs"][0]["stages"][0]["compile_step"]
    assert (step["status"], step["phase"]) == ("timeout", "interpreter_exit")
    assert "did not exit" in step["message"] and step["site"]["line"] == marker_line(name, marker)


DEAD_WORKERS = ["exit0_at_import.py", "raise_systemexit.py", "os_exit_at_import.py", "segfault_at_import.py",
                "segfault_own_faulthandler.py", "sigkill_self.py"]


@pytest.mark.xdist_group("hostile-outcomes")
@pytest.mark.e2e
@pytest.mark.parametrize("name", DEAD_WORKERS)
def test_a_dead_pool_worker_is_the_harness_timeout_and_not_slow_work(outcomes, name):
    """The harness waits out the budget for a task whose worker died; the tool does not, and needs no rerun
    to say so: the answer does not depend on time."""
    s = json.loads((outcomes[name]["dir"] / "run" / "session.json").read_text())
    st = s["runs"][0]["stages"][-1]
    assert st["lost_worker"]["phase"] in ("submission_import", "first_call:64x128x256"), st["lost_worker"]
    assert st["wall_s"] < RUN_BUDGET and [r["role"] for r in s["runs"]] == ["baseline"]
    cause = s["causes"][0]
    assert cause["kind"] == "bug" and cause["narrative"].startswith("Not slow work: "), cause
    assert "never answers a task whose worker died" in cause["narrative"]


@pytest.mark.xdist_group("hostile-outcomes")
@pytest.mark.e2e
def test_hostile_text_is_printed_as_itself(outcomes):
    out = outcomes["markup_message.py"]["run"].stdout
    assert "[bold red]boom[/] in [/tmp/x] and [red]" in out


@pytest.mark.xdist_group("hostile-outcomes")
@pytest.mark.e2e
def test_writes_to_the_channel_are_kept_as_evidence_and_never_acted_on(outcomes):
    s = json.loads((outcomes["garbage_events.py"]["dir"] / "run" / "session.json").read_text())
    anomalies = [a for r in s["runs"] for st in r["stages"] for a in st["anomalies"]]
    assert any("not the worker" in a for a in anomalies) and any("not JSON" in a for a in anomalies)


@pytest.mark.xdist_group("hostile-outcomes")
@pytest.mark.e2e
def test_the_double_fork_really_forked(outcomes):
    assert outcomes["double_fork_empty_env.py"]["pids"].read_text().split()


@pytest.mark.xdist_group("hostile-outcomes")
@pytest.mark.e2e
def test_the_hostile_suite_stays_within_its_time(outcomes):
    assert max(r["run_s"] for r in outcomes.values()) < TOOL_LIMIT


def _stage_worker(k: psutil.Process) -> bool:
    """The test stage's worker: not the preflight's, which starts first, alone, and is gone a second later (a
    zombie for a moment, whose command line cannot be read)."""
    try:
        cmd = " ".join(k.cmdline())
    except psutil.Error:
        return False
    return "diagnose.runs.worker" in cmd and "test.spec.json" in cmd


@pytest.mark.e2e
def test_sigkill_of_the_tool_leaves_no_worker_alive(tmp_path):
    """The parent dies without a chance to clean up: the worker follows it (parent-death signal, and its
    watchdog), and removes the run's temporary directory."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    budget = 20
    p = subprocess.Popen([sys.executable, "-m", "diagnose", "run", str(H / "deadlock.py"), "--probes", "none",
                          "--stages", "test", "--budget", str(budget), "--out", str(tmp_path / "o")],
                         cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    kids = []
    while time.time() < deadline and not kids:
        time.sleep(0.2)
        kids = [k for k in psutil.Process(p.pid).children(recursive=True) if _stage_worker(k)]
    assert kids, "no worker started"
    time.sleep(1.0)
    p.kill()
    p.wait()
    end = time.time() + budget + 10
    while time.time() < end:
        alive = [k for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]
        if not alive and not temp_dirs():
            break
        time.sleep(0.2)
    assert not alive, [k.pid for k in alive]
    assert temp_dirs() == set()     # removed by the tool's keeper process once the tool was gone


@pytest.mark.e2e
def test_100mb_of_output_keeps_capped_tails(tmp_path, no_temp_left):
    res = cli("run", H / "spew.py", "--probes", "none", "--stages", "test", "--out", tmp_path)
    assert res.returncode == 1, res.stderr     # it prints 100 MB at import, then returns zeros: wrong
    st = json.loads((tmp_path / "session.json").read_text())["runs"][0]["stages"][0]
    assert st["stdout_bytes"] >= 100 << 20 and st["stderr_bytes"] >= 100 << 20
    assert len(st["stdout_tail"]) <= 32 << 10 and len(st["stderr_tail"]) <= 32 << 10
    assert st["stdout_tail"].rstrip().endswith("LAST-LINE")
    assert (tmp_path / "session.json").stat().st_size < 2 << 20


@pytest.mark.e2e
def test_memory_hog_is_killed_by_max_rss(tmp_path, no_temp_left):
    res = cli("run", H / "memory_hog.py", "--probes", "none", "--stages", "test", "--max-rss", "1200",
              "--out", tmp_path)
    assert res.returncode == 1
    v = json.loads((tmp_path / "session.json").read_text())["verdict"]
    assert v["status"] == "crash" and "--max-rss" in v["message"]


@pytest.mark.e2e
def test_detached_fork_that_ignores_sigterm_is_still_killed(tmp_path, no_temp_left):
    pidfile = pid_file("pids")
    # the fork inherited stdout, so each step holds to its deadline, as the harness's would: short ones
    res = cli("run", H / "fork_detach.py", "--probes", "none", "--stages", "compile,test", "--budget", "10",
              "--compile-budget", "10", "--out", tmp_path / "o",
              env={"PIDFILE": str(pidfile), "DIAGNOSE_KEEP_ENV": "PIDFILE", "DIAGNOSE_SHARE": str(pidfile.parent)})
    assert pidfile.read_text().split(), res.stderr
    time.sleep(0.5)
    assert survivors(pidfile) == []


@pytest.mark.e2e
def test_vandal_touches_only_its_own_copy(tmp_path, no_temp_left):
    sub = tmp_path / "vandal.py"
    sub.write_bytes((H / "vandal.py").read_bytes())
    keep = tmp_path / "keep.txt"
    keep.write_text("mine")
    res = cli("run", sub, "--probes", "none", "--stages", "compile,test", "--out", tmp_path / "o", cwd=tmp_path)
    # its compile step deletes the stage's files from the container's working directory, so the stage
    # after it cannot start: in the harness, too, both share that directory
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert sub.read_bytes() == (H / "vandal.py").read_bytes() and keep.read_text() == "mine"
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["report.md", "session.json", "trace.json"]


@pytest.mark.e2e
def test_keep_leaves_the_run_directory(tmp_path):
    before = temp_dirs()
    res = cli("run", FIXTURES / "healthy.py", "--probes", "none", "--stages", "test", "--keep", "--out", tmp_path)
    new = temp_dirs() - before
    # the keeper (which removes our temporary directories once we exit) polls every 0.1 s: long enough for it
    # to have removed the run's directory, as it did before --keep renamed it, however slowly the host runs it
    time.sleep(2)
    try:
        assert res.returncode == 0 and len(new) == 1
        # out of the keeper's pattern (diagnose-<pid>-*), and the session says where
        assert os.path.basename(next(iter(new))).startswith("diagnose-kept-"), new
        notes = json.loads((tmp_path / "session.json").read_text())["notes"]
        assert f"run directories kept in {next(iter(new))}" in notes, notes
        # the run's container: its areas, and the tool's own files (the stage's files are removed after the
        # stage, as the harness removes them)
        box = next(iter(new)) + "/r0"
        assert all(os.path.isdir(f"{box}/{a}") for a in ("home", "tmp", "shm", "work"))
        assert os.path.exists(f"{box}/.diagnose/test.spec.json")
    finally:
        import shutil
        for d in new:
            shutil.rmtree(d, ignore_errors=True)


@pytest.mark.e2e
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_writes_a_partial_report_and_kills_the_tree(tmp_path, sig, code):
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "diagnose", "run", str(FIXTURES / "corpus" / "wu_literal_compiled.py"),
                          "--stages", "test", "--jobs", "2", "--out", str(out)], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline:   # wait until a probe is running
        if (out / "session.json").exists() and json.loads((out / "session.json").read_text())["probes"]:
            break
        time.sleep(0.2)
    time.sleep(1.0)
    kids = psutil.Process(p.pid).children(recursive=True)
    assert kids, "no child was running"
    t0 = time.time()
    p.send_signal(sig)
    rc = p.wait(timeout=30)
    assert rc == code
    assert time.time() - t0 < 5
    s = json.loads((out / "session.json").read_text())
    assert s["complete"] is False
    assert "Incomplete diagnosis" in (out / "report.md").read_text()
    # no cause rests on a run that the interrupt cut short
    cut = {r["id"] for r in s["runs"] if r["outcome"] in ("interrupted", "incomplete") or not r["stages"]}
    assert not any(set(c["evidence"]) & cut for c in s["causes"])
    if not s["runs"][0]["stages"] or s["runs"][0]["outcome"] == "interrupted":
        assert s["verdict"]["status"] == "interrupted" and s["causes"] == []
    time.sleep(0.3)
    assert not [k for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.e2e
def test_two_runs_at_once_do_not_collide(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "diagnose", "run", str(FIXTURES / "healthy.py"), "--probes", "none",
           "--stages", "compile,test"]
    ps = [subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
          for _ in range(2)]
    assert [p.wait(timeout=120) for p in ps] == [0, 0]
    outs = sorted((tmp_path / "reports").iterdir())
    assert len(outs) == 2
    for d in outs:
        s = json.loads((d / "session.json").read_text())
        assert s["complete"] and s["verdict"]["status"] == "ok"


def test_atomic_writer_never_leaves_a_truncated_file(tmp_path):
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    f = tmp_path / "session.json"
    write_atomic(f, '{"complete": true}')
    with pytest.raises(TypeError):
        write_atomic(f, object())  # fails inside the write
    assert f.read_text() == '{"complete": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["session.json"]
