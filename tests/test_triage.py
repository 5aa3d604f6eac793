"""`diagnose triage` over a real Dask cluster: a LocalCluster of two worker processes, and a `dask scheduler` with
two `dask worker` processes started here. Each submission is a real `diagnose check` in a process of its own."""
from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT, cli

FILES = {"healthy.py": FIXTURES / "healthy.py", "loop_forever.py": FIXTURES / "loop_forever.py",
         "raises.py": FIXTURES / "raises.py", "sigkill_self.py": FIXTURES / "hostile" / "sigkill_self.py"}
EXPECT = {"healthy.py": ("ok", "passed"), "loop_forever.py": ("timeout", "first call"),
          "raises.py": ("crash", "crash"), "empty.py": ("refused", "refusal"),
          "sigkill_self.py": ("timeout", "import")}


def _folder(root: Path, names) -> Path:
    d = root / "subs"
    d.mkdir(parents=True)
    for n in names:
        if n.startswith("empty"):
            (d / n).write_text("")          # KernelBot refuses an empty file
        else:
            shutil.copy(FILES[n], d / n)
    return d


def _rows(out: Path) -> dict[str, dict]:
    rows = [json.loads(x) for x in (out / "triage.jsonl").read_text().splitlines()]
    return {Path(r["file"]).name: r for r in rows}


# its tests share one xdist_group: under --dist loadgroup one worker runs them all, so this is built once
@pytest.fixture(scope="module")
def triaged(tmp_path_factory):
    root = tmp_path_factory.mktemp("triage")
    subs, out = _folder(root, EXPECT), root / "out"
    tmp = root / "tmp"
    tmp.mkdir()
    t0 = time.monotonic()
    # named as a user in that folder would: each report then names its files relative to it
    # on this CPU a check runs a stage up to a cap, not its budget: the same 45 s keeps the loop's row quick
    res = cli("triage", "subs", "--out", "out", "--budget", "45", "--workers", "2",
              env={"TMPDIR": str(tmp), "DIAGNOSE_CPU_CAP": "45"},
              cwd=root)
    return res, subs, out, time.monotonic() - t0, tmp


@pytest.mark.xdist_group("triage-triaged")
@pytest.mark.e2e
def test_each_submission_gets_its_row_class_and_report(triaged):
    """A pass, a timeout, a crash, a refused file and one that kills its own process (the harness's pool waits for
    a dead worker until its timeout): each its own row, none takes a worker down."""
    res, _, out, wall, _ = triaged
    assert res.returncode == 1, res.stdout + res.stderr        # some did not pass
    rows = _rows(out)
    assert {n: (r["status"], r["class"].split(" (")[0]) for n, r in rows.items()} == EXPECT, rows
    assert rows["loop_forever.py"]["stage"] == "test" and rows["loop_forever.py"]["line"] == 6
    assert "pool worker" in rows["sigkill_self.py"]["why"] or "killed" in rows["sigkill_self.py"]["why"], \
        rows["sigkill_self.py"]
    assert "Empty file" in rows["empty.py"]["why"] and rows["empty.py"]["report"] is None
    for name, r in rows.items():
        if r["report"]:
            assert (out / r["report"] / "report.md").is_file() and (out / r["report"] / "session.json").is_file()
            report = (out / r["report"] / "report.md").read_text()
            assert str(out.parent) not in report and f"check subs/{name} --out out/{r['report']}" in report, report
    md = (out / "triage.md").read_text()
    assert "5 of 5 submission(s): 2 timeout, 1 crash, 1 refused, 1 ok" in md, md
    assert "## first call" in md and "## refusal (1)" in md and "(reports/healthy-" in md
    table = list(csv.DictReader((out / "triage.csv").open()))
    assert sorted(Path(r["file"]).name for r in table) == sorted(EXPECT) and table[0]["status"]
    assert "5 of 5 done in" in res.stdout and wall < 300
    # each task stamped on its worker: Dask's overhead is measured from them, said in the table and at the end
    assert {r["worker"] for r in rows.values()} <= {"0", "1"} and all(r["ended_at"] >= r["started_at"]
                                                                    for r in rows.values())
    assert "Dask's own overhead: " in md and "5 task(s) on " in md and "Dask's own overhead: " in res.stdout


def test_dask_overhead_is_what_no_command_ran_while_tasks_waited():
    """Pure: a worker's wait before its first task and between tasks, and each task's wrapping (from the command's
    unrounded seconds); never the idle tail of a worker with nothing left, never a first wait or a span measured
    on another host's clock."""
    from diagnose.triage.overhead import describe, measure
    from diagnose.triage.rows import Row
    rows = [Row(host="h", worker="0", started_at=100.5, ended_at=150.5, wall_s=49.9, command_s=49.94),
            Row(host="h", worker="0", started_at=151.5, ended_at=160.0, wall_s=8.5, command_s=8.5),
            Row(host="h", worker="1", started_at=100.5, ended_at=110.0, wall_s=9.5, command_s=9.5)]
    timing = {"cluster_s": 3.0, "submitted_at": 100.0, "host": "h"}
    m = measure(rows, timing)
    assert m["between"] == [1.0] and m["first_s"] == 0.5 and m["workers"] == 2 and m["span_s"] == 60.0
    assert abs(m["per_task_s"] - (0.5 + 0.5 + 1.0 + 0.06) / 3) < 1e-9
    text = describe(m)
    assert text.startswith("Dask's own overhead: 687 ms per task (3 task(s) on 2 worker(s); first task started "
                           "500 ms after submission; a worker waited 1.0 s between tasks"), text
    assert "The cluster took 3.0 s to start (not counted above)." in text and "running a command 57% of it" in text
    far = measure(rows + [Row(host="far", worker="w", started_at=5.0, ended_at=7.0, wall_s=2.0)], timing)
    assert far["span_s"] is None and far["first_s"] == 0.5 and "running a command" not in describe(far)
    assert measure([Row(host="h", worker="0", status="lost")], {}) is None and describe(None) == ""


@pytest.mark.xdist_group("triage-triaged")
@pytest.mark.e2e
def test_a_second_triage_reruns_nothing_that_finished(triaged):
    _, subs, out, first, tmp = triaged
    before = (out / "triage.jsonl").read_text()
    t0 = time.monotonic()
    # named in full this time, from elsewhere: the same submissions and settings, so the same keys
    res = cli("triage", subs, "--out", out, "--budget", "45", "--workers", "2", env={"TMPDIR": str(tmp)})
    again = time.monotonic() - t0
    assert res.returncode == 1 and "5 already done" in res.stdout and "0 to check" in res.stdout, res.stdout
    assert (out / "triage.jsonl").read_text() == before
    assert again < first / 2, (again, first)
    # other settings are other answers: nothing is taken from the rows of a different budget
    res = cli("triage", subs / "empty.py", "--out", out, "--budget", "46", env={"TMPDIR": str(tmp)})
    assert "0 already done" in res.stdout, res.stdout


_HANGS = """\
import signal
import time


def custom_kernel(data):
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # deaf to every polite stop
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)
"""


def _alive(p) -> bool:
    import psutil
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _cmdline(p) -> str:
    import psutil
    try:
        return " ".join(p.cmdline())
    except psutil.Error:    # gone meanwhile
        return ""


@pytest.mark.e2e
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_halfway_stops_everything_in_seconds_and_keeps_every_row_written(tmp_path, signum, code):
    """SIGINT as a terminal's Ctrl-C sends it (to the whole process group, Dask's workers included), SIGTERM as
    `kill` sends it (to the triage alone), with a file that ignores both and sleeps, and a busy core beside: the
    triage ends within 10 s, keeps the row written, says in one line how many were done and what resumes, prints
    no traceback, and leaves none of the processes it started. Under SIGTERM the hanging file's command is itself
    frozen (SIGSTOP, with all it started), deaf to the SIGINT it is given first: the SIGKILL after the grace, and
    the sweep of what it started in sessions of their own, are what stop it."""
    import psutil
    subs = _folder(tmp_path, ["raises.py"])
    (subs / "hangs.py").write_text(_HANGS)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        p = subprocess.Popen([sys.executable, "-m", "diagnose", "triage", "subs", "--out", "out", "--budget", "300",
                              "--workers", "2"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        me, seen = psutil.Process(p.pid), {}

        def gather():
            try:
                for c in me.children(recursive=True):
                    seen.setdefault(c.pid, c)
            except psutil.Error:
                pass

        deadline, hanging = time.monotonic() + 240, None
        while time.monotonic() < deadline and (len(_lines(tmp_path / "out")) < 1 or hanging is None):
            gather()
            hanging = hanging or next((c for c in seen.values() if "hangs.py" in _cmdline(c)
                                       and "-m diagnose check" in _cmdline(c)), None)
            time.sleep(0.3)
        assert hanging is not None and len(_lines(tmp_path / "out")) == 1, "the row and the hang never came"
        # the hanging file's own run under way (its command's runs started), every process of the triage seen
        while time.monotonic() < deadline and len(_descendants(hanging)) < 2:
            time.sleep(0.3)
        time.sleep(2)
        gather()
        started = [c for c in seen.values() if _alive(c)]
        assert len(started) >= 5, [_cmdline(c) for c in started]       # workers, the command, its runs
        if signum == signal.SIGTERM:       # the command and all it started (its keeper would wake it)
            for c in [hanging, *_descendants(hanging)]:
                c.suspend()
        t0 = time.monotonic()
        (os.killpg if signum == signal.SIGINT else os.kill)(p.pid, signum)
        stdout, stderr = p.communicate(timeout=60)
        took = time.monotonic() - t0
        left_at = time.monotonic() + 5
        while time.monotonic() < left_at and any(_alive(c) for c in started):
            time.sleep(0.1)
        left = [(c.pid, _cmdline(c)[:120]) for c in started if _alive(c)]
        for c in started:
            if _alive(c):
                c.kill()
    finally:
        busy.kill()
        busy.wait()
    print(f"{signal.Signals(signum).name}: exit after {took:.2f} s; {len(started)} process(es) of the triage")
    assert p.returncode == code, stdout + stderr
    assert took < 10, (took, stderr)
    assert not left, left
    said = [x for x in stderr.splitlines() if "interrupted" in x]
    assert said == ["interrupted: 1 of 2 submission(s) done (1 crash); `diagnose triage subs --out out --budget "
                    "300 --workers 2` resumes from out/triage.jsonl"], stderr
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    rows = [json.loads(x) for x in _lines(tmp_path / "out")]
    assert [Path(r["file"]).name for r in rows] == ["raises.py"] and rows[0]["status"] == "crash"   # not judged


@pytest.mark.e2e
def test_a_ctrl_c_while_the_cluster_starts_stops_it_quietly(tmp_path):
    """Ctrl-C (to the process group) while the workers are still starting: each would die of it with Dask's
    traceback and the cluster's start fail; the triage says the one line, exits 130 and leaves nothing."""
    import psutil
    _folder(tmp_path, ["raises.py"])
    p = subprocess.Popen([sys.executable, "-m", "diagnose", "triage", "subs", "--out", "out", "--workers", "2"],
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    me, deadline = psutil.Process(p.pid), time.monotonic() + 60
    while time.monotonic() < deadline and len(_descendants(me)) < 2:
        time.sleep(0.05)
    started = _descendants(me)
    assert started, "no worker ever started"
    t0 = time.monotonic()
    os.killpg(p.pid, signal.SIGINT)
    stdout, stderr = p.communicate(timeout=60)
    took = time.monotonic() - t0
    time.sleep(2)
    assert p.returncode == 130 and took < 10, (took, stdout + stderr)
    assert [x for x in stderr.splitlines() if "interrupted" in x] == [
        "interrupted: 0 of 1 submission(s) done (none); `diagnose triage subs --out out --workers 2` resumes "
        "from out/triage.jsonl"], stderr
    assert "Traceback" not in stderr and not [c.pid for c in started if _alive(c)], stderr


def _descendants(p) -> list:
    import psutil
    try:
        return p.children(recursive=True)
    except psutil.Error:
        return []


@pytest.mark.e2e
def test_a_row_written_by_hand_is_not_believed_on_resume(tmp_path):
    """A row that says a crashing file passed, appended to triage.jsonl by what is not the triage's controller
    (unsigned, or signed by a guess): the resumed triage checks that file again, says once how many rows it
    ignored, and the file stays a crash. Each row holds the digests of the session and report its task read."""
    import hashlib
    subs, out = _folder(tmp_path, ["raises.py"]), tmp_path / "out"
    res = cli("triage", subs, "--out", out, "--budget", "30", "--workers", "1", timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    (row,) = [json.loads(x) for x in _lines(out)]
    assert row["status"] == "crash" and len(row["sig"]) == 64
    for name, field in (("session.json", "session_sha256"), ("report.md", "report_sha256")):
        assert row[field] == hashlib.sha256((out / row["report"] / name).read_bytes()).hexdigest()
    key = (out / ".triage-key").read_bytes()
    assert key.hex() not in (out / "triage.jsonl").read_text() and key.hex() not in res.stdout + res.stderr
    assert "sig" not in (out / "triage.csv").read_text().splitlines()[0]
    forged = {k: v for k, v in row.items() if k != "sig"}
    forged.update(status="ok", **{"class": "passed"}, why=None, cause=None)
    # in place of the crash's own row (as if its task had been stopped before it came): the key is still there
    (out / "triage.jsonl").write_text(json.dumps(forged) + "\n" + json.dumps({**forged, "sig": "f" * 64}) + "\n")
    res = cli("triage", subs, "--out", out, "--budget", "30", "--workers", "1", timeout=300)
    assert res.returncode == 1 and "0 already done" in res.stdout and "1 to check" in res.stdout, res.stdout
    assert res.stderr.count("2 row(s) in triage.jsonl were not written by a triage here (no valid signature): "
                            "ignored, their files are checked again") == 1, res.stderr
    rows = [json.loads(x) for x in _lines(out)]
    assert len(rows) == 3 and rows[-1]["status"] == "crash" and rows[-1]["key"] == row["key"]
    md = (out / "triage.md").read_text()
    assert "1 of 1 submission(s): 1 crash" in md and "report changed" not in md, md


def _lines(out: Path) -> list[str]:
    f = out / "triage.jsonl"
    return f.read_text().splitlines() if f.is_file() else []


@pytest.mark.e2e
def test_a_running_dask_scheduler_and_its_workers_take_the_tasks(tmp_path):
    """`dask scheduler` and two `dask worker --resources GPU=1` processes on localhost, started and stopped here. Two
    files with the same content are two rows."""
    subs, out = _folder(tmp_path, ["empty.py", "empty_too.py", "raises.py"]), tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    info = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--no-dashboard", "--port",
                               "0", "--scheduler-file", str(info)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 60
        while not info.is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        procs += [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                                    "--resources", "GPU=1", "--no-dashboard", "--name", f"w{i}"], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(2)]
        res = cli("triage", subs, "--out", out, "--budget", "20", "--scheduler", address)
        rows = _rows(out)
        assert res.returncode == 1 and {n: r["status"] for n, r in rows.items()} == {
            "empty.py": "refused", "empty_too.py": "refused", "raises.py": "crash"}, res.stdout + res.stderr
        assert all(r["host"] and r["wall_s"] is not None for r in rows.values())     # each ran as a task
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


_TWO_CARDS = """
import json, sys, threading
from pathlib import Path
from diagnose.triage.controller import run
from diagnose.triage.inputs import items
todo = items([Path(p) for p in sys.argv[1:]], "check", {"budget": 30.0}, Path("out"), "out",
             {"here": ["--budget", "30"], "whole": ["--budget", "30"]})
# two cards given to the controller (this machine has none): as the CLI gives those of a cluster made here
rows = [r.to_dict() for r in run(todo, {"gpus": ["0", "1"], "limit_s": 600.0}, None, None, {}, threading.Event()) if r]
print(json.dumps({"rows": rows}))
"""


@pytest.mark.e2e
def test_each_task_gets_its_workers_card_and_no_card_runs_two_tasks_at_once(tmp_path):
    """The triage's controller (in a process of its own, as the CLI runs it) with two cards: each submission's command
    sees exactly its worker's card in CUDA_VISIBLE_DEVICES, as its crash message says, and the row records that
    card; on each card the tasks ran one after another."""
    files = []
    for i in range(3):       # three on two cards: one card runs two, one after the other
        f = tmp_path / f"sees_{i}.py"
        f.write_text(f"import os\nSEEN = os.environ.get('CUDA_VISIBLE_DEVICES')  # {i}\n\n\ndef custom_kernel(data):\n"
                     f"    raise RuntimeError(f'saw CUDA_VISIBLE_DEVICES={{SEEN}}')\n")
        files.append(f.name)
    res = subprocess.run([sys.executable, "-c", _TWO_CARDS, *files], cwd=tmp_path, capture_output=True,
                         text=True, timeout=400, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    rows = got["rows"]
    assert len(rows) == 3
    for r in rows:
        assert r["status"] == "crash" and f"saw CUDA_VISIBLE_DEVICES={r['gpu']}" in r["why"], r
    assert {r["gpu"] for r in rows} == {"0", "1"}
    for card in ("0", "1"):
        spans = sorted((r["started_at"], r["ended_at"]) for r in rows if r["gpu"] == card)
        assert all(b[0] >= a[1] for a, b in pairwise(spans)), spans


@pytest.mark.e2e
def test_bad_input_is_one_line_and_triage_help_imports_no_dask(tmp_path):
    res = cli("triage", tmp_path / "missing", "--out", tmp_path / "o")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "no such file or folder" in res.stderr
    code = ("import sys; from diagnose.cli.app import main\n"
            "try:\n    main(['triage', '--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'dask' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and "--scheduler" in r.stdout, r.stdout + r.stderr


def test_a_pinned_process_names_only_its_own_cards(monkeypatch, tmp_path):
    """The report's 'this machine has' under a triage worker: the cards CUDA_VISIBLE_DEVICES leaves it, not every
    card of the host (an H100 pair's tasks each listed both)."""
    import glob

    from diagnose.runs import device
    infos = []
    for i, model in enumerate(["NVIDIA H100 80GB HBM3", "NVIDIA H200"]):
        f = tmp_path / f"{i}" / "information"
        f.parent.mkdir()
        f.write_text(f"Model: \t {model}\nIRQ: 1\n")
        infos.append(str(f))
    monkeypatch.setattr(glob, "glob", lambda pattern: infos)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert device.gpu_names() == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert device.gpu_names() == ["NVIDIA H200"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5d1c")      # a UUID: no index to pick by, so every card
    assert device.gpu_names() == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]


def test_a_command_gets_its_paths_as_the_user_gave_them_from_the_triage_folder(tmp_path, monkeypatch):
    """Red-team cases: a name starting with '-' read as an option (exit 2, rerun on every resume); '..dots.py',
    inside the folder, taken for a parent; a symlink passed by its target's whole path; '../out' made whole. The
    items and flags are the ones the CLI makes (triage/inputs.py, cli/triage.child_flags)."""
    from diagnose.cli.options import Shared
    from diagnose.cli.triage import child_flags
    from diagnose.triage.inputs import items
    here = tmp_path / "here"
    (here / "pr").mkdir(parents=True)
    for name in ("-dash.py", "..dots.py", "a.py"):
        (here / name).write_text("")
    (here / "lnk.py").symlink_to(here / "a.py")
    (tmp_path / "elsewhere.py").write_text("")
    monkeypatch.chdir(here)
    flags = child_flags(Shared(budget=30.0, problems_root=Path("pr")))

    def item(file: str, out: str = "o") -> dict:
        return items([Path(file)], "check", {}, here / out, out, flags)[0]
    assert item("-dash.py")["argv"][:3] == ["check", "./-dash.py", "--out"]
    assert item(str(here / "..dots.py"))["argv"][1] == "..dots.py"          # below the folder: relative
    lnk = item("lnk.py", "../out")
    assert lnk["argv"][1:3] == ["lnk.py", "--out"] and lnk["argv"][3].startswith("../out/reports/lnk-")  # as named
    assert item("a.py")["argv"][-4:] == ["--problems-root", "pr", "--budget", "30"]
    assert item(str(tmp_path / "elsewhere.py"))["argv"][1] == str(tmp_path / "elsewhere.py")   # outside: whole
    # a worker without the folder: whole paths, and the problem folder as resolved
    whole = item("a.py")["argv_whole"]
    assert whole[1] == str(here / "a.py") and whole[3] == str(here / "o" / "reports" / Path(whole[3]).name)
    assert whole[whole.index("--problems-root") + 1] == str(here / "pr")


def test_a_report_link_with_a_space_is_still_a_link():
    from diagnose.output.triage import markdown
    from diagnose.triage.rows import Row
    row = Row(file="sub dir/healthy one.py", status="ok", cause_class="passed",
              report="reports/healthy one-951f450711", wall_s=12.0)
    assert "[sub dir/healthy one.py](<reports/healthy one-951f450711/report.md>)" in markdown([row], 1)
    row = replace(row, file="healthy.py", report="reports/healthy-951f450711")
    assert "[healthy.py](reports/healthy-951f450711/report.md)" in markdown([row], 1)
