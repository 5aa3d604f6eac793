"""The quick tier (`pytest -m "not e2e"`) is the suite a developer runs after every edit, so it must reach every
module that runs in the tool's own process: each module of diagnose/ and probes/ is imported by a test of the
quick tier, directly or through the code's own imports. Code that only ever runs in another process (the child
worker, the jail, a built-in task's files, a Dask worker's preload, a probe's worker hook) is reached by the e2e
tests that start those processes, and is named here with where it runs."""
import ast
import multiprocessing.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes.registry import ORDER
from tests import conftest

ROOT = Path(__file__).resolve().parent.parent

# Code that runs in another process (a module here, or a package and all of it) and what it imports: reached by
# the e2e tier only.
OTHER_PROCESSES = {
    "diagnose.runs.worker": "the child worker, in every run's own process (the only code that imports torch)",
    "diagnose.runs.jail": "a step's jail: the first process of each step, before the worker",
    "diagnose.tasks": "a built-in task's files: written into a run's container and run there",
    "diagnose.triage.worker_setup": "the preload of each Dask worker process",
}
ENTRY_POINTS = ("__main__",)          # `python -m diagnose`, `python -m diagnose.runs.worker`
HOOK = "hook"                         # probes/<name>/hook.py: loaded by name in the child worker


# What probes/door.py and probes/finders.py load by the registry's names rather than by an import statement:
# reaching them reaches each probe's probe.py and its find.py
LOADED_BY_NAME = {"probes.door": {f"probes.{n}.probe" for n in ORDER},
                  "probes.finders": {f"probes.{n}.find" for n in ORDER}}


def _modules() -> dict[str, Path]:
    out = {}
    for top in ("diagnose", "probes"):
        for p in (ROOT / top).rglob("*.py"):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _marked_e2e(node, src: str) -> bool:
    return any("e2e" in ast.get_source_segment(src, d) for d in getattr(node, "decorator_list", []))


def _quick_imports(path: Path) -> set[str]:
    """What a test file imports outside its e2e tests (a file marked e2e as a whole imports nothing quick);
    `from pkg import mod` names pkg.mod too."""
    src = path.read_text(encoding="utf-8")
    tree = ast.parse(src)
    if any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
           and "e2e" in ast.get_source_segment(src, n.value) for n in tree.body):
        return set()
    out, todo = set(), [tree]
    while todo:
        for n in ast.iter_child_nodes(todo.pop()):
            if _marked_e2e(n, src):
                continue
            if isinstance(n, ast.ImportFrom) and n.module and not n.level:
                out |= {n.module} | {f"{n.module}.{a.name}" for a in n.names}
            elif isinstance(n, ast.Import):
                out |= {a.name for a in n.names}
            todo.append(n)
    return out


def _code_imports(path: Path, known: dict) -> set[str]:
    out = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.ImportFrom) and n.module and not n.level:
            out |= {n.module} | {f"{n.module}.{a.name}" for a in n.names}
        elif isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
    return {m for m in out if m in known}


def _reach(roots: set[str], known: dict) -> set[str]:
    """The modules roots import, through the code's own imports; importing a.b.c imports a and a.b too."""
    seen, todo = set(), list(roots)
    while todo:
        m = todo.pop()
        if m in seen or m not in known:
            continue
        seen.add(m)
        todo += list(_code_imports(known[m], known)) + sorted(LOADED_BY_NAME.get(m, ()))
        todo += [".".join(m.split(".")[:i]) for i in range(1, m.count(".") + 1)]
    return seen


def test_every_module_that_runs_in_the_tools_process_is_reached_by_the_quick_tier():
    known = _modules()
    quick = _reach({m for p in (ROOT / "tests").glob("*.py") for m in _quick_imports(p)}, known)
    elsewhere = {m for m in known if m.rsplit(".", 1)[-1] in ENTRY_POINTS
                 or (m.startswith("probes.") and m.rsplit(".", 1)[-1] == HOOK)
                 or any(m == r or m.startswith(r + ".") for r in OTHER_PROCESSES)}
    elsewhere = _reach(elsewhere, known)
    missing = sorted(set(known) - quick - elsewhere)
    assert not missing, f"no test outside the e2e mark imports these (write a unit test for each): {missing}"
    # the list of other processes is not stale, and it is not the quick tier's whole story
    assert set(OTHER_PROCESSES) <= set(known), set(OTHER_PROCESSES) - set(known)
    assert len(quick) > len(known) * 2 // 3, (len(quick), len(known))


def test_a_quick_test_that_starts_a_process_is_caught():
    """The guard in conftest sees a process started from a test of the quick tier, by subprocess and by
    multiprocessing's spawn (here each started on purpose, then forgotten, so that this test itself passes)."""
    conftest.started.clear()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    seen = list(conftest.started)
    conftest.started.clear()
    assert seen and seen[0].startswith("subprocess.Popen") and "-c" in seen[0], seen
    # how multiprocessing's spawn and forkserver start their process (no audit event of its own)
    pid = multiprocessing.util.spawnv_passfds(os.fsencode(sys.executable), [sys.executable, "-c", "pass"], ())
    _, status = os.waitpid(pid, 0)
    seen = list(conftest.started)
    conftest.started.clear()
    assert status == 0 and [x for x in seen if "multiprocessing" in x], seen


def _marked(node: ast.AST, word: str) -> bool:
    return any(word in ast.unparse(d) for d in getattr(node, "decorator_list", ()))


def test_an_e2e_test_sharing_a_module_fixture_keeps_it_on_one_worker():
    """`--dist loadgroup` hands each e2e test to whichever worker is free, and each worker builds the module
    fixtures its tests use: one built of real runs (test_boundary's jailed cases) was built twice, once per
    worker, until its tests shared an xdist_group."""
    wrong, seen = [], 0
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        e2e_file = any(isinstance(n, ast.Assign) and "pytestmark" in ast.unparse(n) and "e2e" in ast.unparse(n)
                       for n in tree.body)
        shared = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and any(
            "fixture" in ast.unparse(d) and ("module" in ast.unparse(d) or "session" in ast.unparse(d))
            for d in n.decorator_list)}
        for n in tree.body:
            if isinstance(n, ast.FunctionDef) and n.name.startswith("test") and {a.arg for a in n.args.args} & shared \
                    and (e2e_file or _marked(n, "e2e")):
                seen += 1
                if not _marked(n, "xdist_group"):
                    wrong.append(f"{path.name}::{n.name}")
    assert seen >= 5, "no e2e test uses a module fixture: this checks nothing"
    assert not wrong, wrong


SUITE = '''
import os, pytest
@pytest.fixture(scope="module")
def shared():
    with open(os.path.join(os.environ["OUT_DIR"], "built"), "a") as fh:
        fh.write(f"{os.getpid()}\\n")
@pytest.mark.xdist_group("one")
@pytest.mark.parametrize("i", range(6))
def test_grouped(shared, i):
    with open(os.path.join(os.environ["OUT_DIR"], "ran"), "a") as fh:
        fh.write(f"{os.getpid()}\\n")
@pytest.mark.parametrize("i", range(6))
def test_free(i):
    pass
'''


@pytest.mark.e2e
def test_loadgroup_keeps_a_group_on_one_worker_and_builds_its_fixture_once(tmp_path):
    """What .ci/run's e2e tier rests on: under `--dist loadgroup` an xdist_group's tests run on one worker. With
    pytest 9.2 and the xdist of this writing they were spread over both (the group never reached the scheduler), and
    each worker built every shared module fixture: about 5 minutes of the e2e tier."""
    (tmp_path / "test_grouping.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist",
                           "loadgroup", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OUT_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ran = (tmp_path / "ran").read_text().split()
    assert len(ran) == 6 and len(set(ran)) == 1, ran
    assert (tmp_path / "built").read_text().split() == ran[:1]
