"""Candidates timed in other processes belong to the search that waits for them (probes/search/processes.py): a
worker's clock reads of the submission's code go up a pipe, each frame with a serial of its own while its call
lives, and the starting process counts them under the frames of the phase's thread that wait for them. A process
pool that does real work, timing no candidate, is no search.

The quick tests take the pieces in this process (a pipe, hand-made reads); the e2e tests run the hook in a real
process whose submission starts a ProcessPoolExecutor, spawned and forked (well under a second each); the whole
diagnosis of a spawned pool, to a verified pin per shape, is tests/test_search_choices.py's `process_search`.
"""
from __future__ import annotations

import builtins
import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from probes.search.processes import Bridge, Upstream
from probes.search.spawned import _ChildApi
from probes.search.watch import Search

HERE = os.path.dirname(__file__) + os.sep


def _one_candidate(up: Upstream, chunk: int) -> None:
    up.read("time.perf_counter", 0.5, sys._getframe(), 7)
    up.read("time.perf_counter", 0.5, sys._getframe(), 7)


def test_a_workers_reads_go_up_the_pipe_each_call_with_a_serial_of_its_own_and_without_its_parents_frames():
    rfd, wfd = os.pipe()
    try:
        outer = sys._getframe()
        up = Upstream(wfd, HERE, inherited=[id(outer)])     # as a forked worker inherits its parent's frames
        for chunk in (8, 16):
            _one_candidate(up, chunk)
        sent = [json.loads(line) for line in os.read(rfd, 65536).decode().splitlines()]
    finally:
        os.close(rfd)
        os.close(wfd)
    assert len(sent) == 4 and {m["pid"] for m in sent} == {os.getpid()} and {m["thread"] for m in sent} == {7}
    chains = [m["chain"] for m in sent]
    # the test's own frame was inherited: only the worker's call is sent, one frame
    assert [[f[1] for f in c] for c in chains] == [["_one_candidate"]] * 4, chains
    serials = [c[0][0] for c in chains]
    assert serials[0] == serials[1] != serials[2] == serials[3], serials
    assert chains[0][0][5]["chunk"] == "8" and chains[2][0][5]["chunk"] == "16", chains


def _wait_for_workers(search: Search, bridge: Bridge, n: int) -> None:
    """The phase's thread waiting on n workers, each process timing one candidate (two reads of one call)."""
    for i in range(n):
        for line in (30, 32):
            msg = {"pid": 100 + i % 2, "thread": 1, "kind": "time.perf_counter", "weight": 0.5, "worked": None,
                   "chain": [[i + 1, "_time_one", __file__, 28, line, {"chunk": str(8 << i)}]]}
            search.read(msg["kind"], msg["weight"], None, (msg["pid"], msg["thread"]), None, chain=bridge.chain(msg))


def test_reads_of_worker_processes_are_candidates_of_the_frame_that_waits_for_them():
    api = types.SimpleNamespace(submission_dir=HERE, emit=lambda **f: None)
    search = Search(api, "first_call:x")
    bridge = Bridge(types.SimpleNamespace(api=api, search=search))
    _wait_for_workers(search, bridge, 6)
    (found,) = search.found()
    assert found["func"] == "_wait_for_workers" and found["candidates"] == 6, found
    assert search.linked(64) and not search.linked(7), "a worker's candidate is the waiting search's value"
    # a worker's calls that ended are let go; its live one is kept
    assert sorted(k[2] for k in bridge.frames) == [5, 6], bridge.frames


def test_a_read_that_arrives_after_its_caller_moved_on_counts_where_the_caller_last_waited_for_that_worker():
    api = types.SimpleNamespace(submission_dir=HERE, emit=lambda **f: None)
    search = Search(api, "first_call:x")
    bridge = Bridge(types.SimpleNamespace(api=api, search=search))
    _wait_for_workers(search, bridge, 5)
    api.submission_dir = HERE + "elsewhere" + os.sep    # the phase's thread is in no frame of the submission's now
    msg = {"pid": 100, "thread": 1, "kind": "time.perf_counter", "weight": 0.5, "worked": None,
           "chain": [[9, "_time_one", __file__, 28, 32, {"chunk": "4096"}]]}
    search.read("time.perf_counter", 0.5, None, (100, 1), None, chain=bridge.chain(msg))
    api.submission_dir = HERE
    (found,) = search.found()
    # five candidates and the half (one read) that came late, still under the waiting frame
    assert found["func"] == "_wait_for_workers" and found["candidates"] == 5, found
    assert search.linked(4096)


def test_a_spawned_workers_hook_patches_a_module_once_it_has_run_and_then_leaves_the_import_statement_alone(
        tmp_path, monkeypatch):
    """A spawned worker has no worker import hook: its hook watches import statements until each module it waits
    for has run to its end (not while the module's own imports run, when it holds nothing yet)."""
    (tmp_path / "late_timer_mod.py").write_text("import json\nimport os\ndef do_bench():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    plain, got = builtins.__import__, []
    api = _ChildApi(str(tmp_path) + os.sep)
    api.on_import("json", lambda m: got.append(("json", hasattr(m, "dumps"))))     # imported already: at once
    api.on_import("late_timer_mod", lambda m: got.append(("late", hasattr(m, "do_bench"))))
    assert got == [("json", True)] and builtins.__import__ is not plain
    try:
        importlib.invalidate_caches()
        exec("import late_timer_mod", {})
    finally:
        monkeypatch.delitem(sys.modules, "late_timer_mod", raising=False)
        restored, builtins.__import__ = builtins.__import__ is plain, plain
    assert got == [("json", True), ("late", True)] and restored, got


POOL = '''
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

_BEST = {}


def _time_one(rows, chunk):
    t0 = time.perf_counter()
    sum(range(rows * chunk))
    return time.perf_counter() - t0, chunk


def _work(rows, chunk):
    return sum(range(rows * chunk))


def custom_kernel(rows, how, search):
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=2, mp_context=get_context(how)) as pool:
        if search:
            futures = [pool.submit(_time_one, rows, c) for c in (8, 16, 32, 64, 128, 256)]
            _BEST[rows] = min(f.result() for f in futures)[1]
            return _BEST[rows]
        done = sum(pool.map(_work, [rows] * 6, (8, 16, 32, 64, 128, 256)))
    return done, time.perf_counter() - t0
'''

DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from probes.search import hook
sent = []
class Api:
    submission_dir = sys.argv[1] + "/"
    args = {}
    def emit(self, **f): sent.append(f)
    def on_phase(self, fn): self.phase = fn
    def on_import(self, m, p): pass
    def on_stage_end(self, fn): pass
    def on_torch(self, fn): pass
if __name__ == "__main__":
    api = Api(); hook.install(api)
    import submission
    api.phase("begin", "first_call:a", {"case": "a"})
    submission.custom_kernel(100, sys.argv[2], sys.argv[3] == "search")
    api.phase("end", "first_call:a", {"ok": True})
    print(json.dumps([e for e in sent if e["what"] == "phase"]))
'''


def _phase(tmp_path: Path, how: str, what: str) -> list[dict]:
    (tmp_path / "submission.py").write_text(POOL)
    (tmp_path / "driver.py").write_text(DRIVER)
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path), how, what], capture_output=True,
                         text=True, timeout=120, check=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    return json.loads(out.stdout)


@pytest.mark.e2e
@pytest.mark.parametrize("how", ["spawn", "fork"])
def test_candidates_timed_in_spawned_or_forked_workers_are_the_search_of_the_caller_that_waits(tmp_path, how):
    (phase,) = _phase(tmp_path, how, "search")
    (found,) = phase["searches"]
    assert found["func"] == "custom_kernel" and found["candidates"] == 6, found
    assert [(c["path"], c["linked"]) for c in phase["changed"]] == [("_BEST", True)], phase["changed"]


@pytest.mark.e2e
@pytest.mark.parametrize("how", ["spawn", "fork"])
def test_a_process_pool_doing_real_work_is_no_search(tmp_path, how):
    """The workers compute and time nothing; the caller reads the clock once before and once after them all."""
    assert _phase(tmp_path, how, "work") == []
