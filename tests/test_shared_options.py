"""The options `run`, `check`, `bisect` and `triage` share, as one record (cli/options.py): what it writes as a
child's argv is parsed back by the real CLI parser into an equal record, and a bad value to `triage` is refused in
one line before any cluster: no Dask imported, no process started, no folder made, well under a second."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from diagnose.cli.app import app
from diagnose.cli.options import ANSWER, Shared
from tests.conftest import FIXTURES, ROOT

EVERY = tuple(f.name for f in dataclasses.fields(Shared))


def _parsed(command: str, argv: list[str]) -> Shared:
    """argv through the command's own click parser (as `diagnose COMMAND ...` parses it), then into the record
    the way every command builds it."""
    cmd = typer.main.get_command(app).commands[command]
    ctx = cmd.make_context(command, ["submission.py", *argv])
    return Shared.of(ctx.params)


@pytest.mark.parametrize("record", [
    Shared(),
    Shared(problem=Path("problems/grayscale"), problems_root=Path("-rk"), task="identity", budget=1.5,
           compile_budget=60.0, small=False, stages="compile,test", probes="none", gpus="0,1", jobs=3),
    Shared(budget=45.0, small=True, probes="autotune,warmup", problems_root=Path("/abs/reference kernels")),
])
def test_the_records_argv_parses_back_to_the_same_record(record):
    assert _parsed("run", record.argv(EVERY)) == record
    # a triage task's child is given what changes the answer, never where it runs (its card is its own)
    child = record.argv()
    assert _parsed("run", child) == record.but(gpus=None, jobs=None)
    if record.stages is None and record.probes is None:       # `check` has neither
        assert _parsed("check", child) == record.but(gpus=None, jobs=None)
    assert "--gpus" not in child and "--jobs" not in child
    assert set(record.answer()) <= set(ANSWER)


def test_a_budget_is_written_as_exactly_as_given():
    assert Shared(budget=30.0).argv() == ["--budget", "30"]
    assert Shared(budget=0.1 + 0.2).argv() == ["--budget", repr(0.1 + 0.2)]
    assert _parsed("check", Shared(budget=0.1 + 0.2).argv()).budget == 0.1 + 0.2


_BAD = """
import json, os, sys, time
import psutil
from diagnose.cli.app import main
t0 = time.monotonic()
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
took = time.monotonic() - t0
print(json.dumps({"code": code, "took": took, "children": len(psutil.Process().children(recursive=True)),
                  "dask": sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed"))}))
"""


@pytest.mark.e2e
@pytest.mark.parametrize("args, says", [
    (["--budget", "-3"], "--budget must be a finite positive number, got -3"),
    (["--budget", "abc"], "Invalid value for '--budget'"),
    (["--problems-root", "no/such/checkout"], "--problems-root no/such/checkout: not a directory"),
    (["--problem", "no/such/problem"], "--problem no/such/problem: not a directory"),
    (["--depth", "run", "--stages", "test,warmup"], "--stages: unknown stage warmup"),
    (["--depth", "run", "--probes", "nosuch"], "--probes: unknown probe nosuch"),
    (["--stages", "test"], "--stages and --probes are for --depth run"),
])
def test_a_bad_value_to_triage_is_refused_before_any_cluster_starts(tmp_path, args, says):
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-c", _BAD, "triage", str(FIXTURES / "raises.py"), "--out", str(out),
                          *args], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)})
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["code"] == 2 and res.stderr.count("\n") == 1 and says in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    # no cluster: a LocalCluster cannot start without importing distributed, nor without a process of its own
    assert got["dask"] == [] and got["children"] == 0, got
    # ...and it answered at once: 0.17 s measured idle; the bound leaves room for a loaded 2-core machine, which
    # a cluster's start (processes, a scheduler, workers) would still exceed
    assert got["took"] < 5.0, got
    assert not out.exists() and not (tmp_path / ".triage-dask.log").exists()
