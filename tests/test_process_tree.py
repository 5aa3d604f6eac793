"""A run's process tree is found from one shared look at the host's process table, not one read of all of /proc
per process it has seen and per run: with 15 runs polling ten times a second that had saturated the parent."""
import subprocess
import sys
import time

import psutil
import pytest

from diagnose.runs.runner import process_tree
from diagnose.runs.runner.process_tree import ProcessTree

pytestmark = pytest.mark.e2e     # every test here starts real processes

# a shell that starts three sleepers beneath it (a tree three processes wide), then waits
TREE = "sleep 60 & sleep 60 & (sleep 60 & wait) & wait"


def _spawn_tree():
    p = subprocess.Popen(["sh", "-c", TREE], start_new_session=True)
    deadline = time.time() + 10
    while len(psutil.Process(p.pid).children(recursive=True)) < 4 and time.time() < deadline:
        time.sleep(0.05)
    return p


def test_every_descendant_is_found_and_the_runs_share_one_look_at_the_host(monkeypatch):
    looks = []
    real = process_tree.ProcessTable

    def counted():
        looks.append(1)
        return real()
    monkeypatch.setattr(process_tree, "ProcessTable", counted)
    monkeypatch.setattr(process_tree, "SHARED_TABLE_S", 30.0)   # a look serves every scan of this test
    monkeypatch.setattr(process_tree, "_table", None)
    a, b = _spawn_tree(), _spawn_tree()
    try:
        trees = [ProcessTree(psutil.Process(p.pid), "m") for p in (a, b)]
        for _ in range(5):
            for t in trees:
                t.scan()
        assert len(looks) == 1
        for p, t in zip((a, b), trees, strict=True):
            want = {p.pid} | {c.pid for c in psutil.Process(p.pid).children(recursive=True)}
            assert {pid for pid, _ in t.procs} == want and len(want) == 5
    finally:
        for t, p in zip(trees, (a, b), strict=True):
            assert t.kill_all(p.pid) == []


def test_a_fresh_look_finds_a_process_started_after_the_shared_one(monkeypatch):
    monkeypatch.setattr(process_tree, "SHARED_TABLE_S", 30.0)
    p = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; time.sleep(1.0); "
                          "subprocess.Popen(['sleep', '60']); time.sleep(60)"], start_new_session=True)
    tree = ProcessTree(psutil.Process(p.pid), "m")
    try:
        tree.scan(fresh=True)
        assert len(tree.procs) == 1
        deadline = time.time() + 10
        while not psutil.Process(p.pid).children() and time.time() < deadline:
            time.sleep(0.05)
        tree.scan()                     # the shared look is older than the fork: not seen yet
        assert len(tree.procs) == 1
        tree.scan(fresh=True)
        assert len(tree.procs) == 2
    finally:
        assert tree.kill_all(p.pid) == []
