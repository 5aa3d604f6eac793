"""When the time goes into a library, the mechanism is named: extension builds, import-time work in the
submission's own statements, recompiles cut off by the deadline, and warmups that reach the kernel through a
helper (Triton autotuning: test_autotune.py)."""
import ast
import json

import pytest

from diagnose.session import Run, StageResult
from probes import door
from probes.base import RUN, PlanContext
from probes.door import scan as scan_source
from probes.extension_build.facts import step_builds
from tests.conftest import FIXTURES, cli

L = FIXTURES / "lib"

def run(tmp_path, sub, *args):
    out = tmp_path / sub
    res = cli("run", L / f"{sub}.py", "--out", out, *args)
    s = json.loads((out / "session.json").read_text())
    return res, s, {p["name"]: p for p in s["probes"]}


@pytest.mark.e2e
def test_a_module_level_loop_is_the_submissions_own_import_work(tmp_path):
    """L8 is `_TABLE.append(...)`: a builtin's method, inside the submission's own module-level loop."""
    res, s, probes = run(tmp_path, "import_loop_table", "--stages", "test", "--budget", "8", "--probes", "import_init")
    assert probes["import_init"]["state"] == "run" and "L7" in probes["import_init"]["why"], probes["import_init"]
    top = s["causes"][0]
    assert (top["kind"], top["suspects"]) == ("too_slow", ["import_init"]), top
    assert not any(c["probe"] == "import_init" for c in s["cleared"])      # deferring moved it: no fix, not cleared


@pytest.mark.e2e
def test_a_comprehension_and_a_call_into_torch_are_import_work(tmp_path):
    res, s, probes = run(tmp_path, "import_torch_work", "--stages", "test", "--budget", "60", "--probes", "import_init")
    why = probes["import_init"]["why"]
    assert probes["import_init"]["state"] == "run" and "L7" in why, why     # torch.linalg.eigvals at import


@pytest.mark.e2e
def test_a_recompile_cut_off_by_the_deadline_is_evidence_in_both_forms(tmp_path):
    """dynamic=False with a backend whose second graph takes a minute: the deadline comes while the second
    shape compiles, whatever the machine's load. The cause is the recompile, fixed by dynamic=True (one graph
    for every shape). The same evidence, with the compile written as torch.compile(...)(fn) instead of a
    decorator, plans the same toggle, applied to the call."""
    res, s, probes = run(tmp_path, "recompile_cutoff", "--stages", "test", "--budget", "15", "--jobs", "2",
                         "--probes", "compile_mode,recompile")
    assert probes["compile_mode"]["state"] == "run", probes["compile_mode"]
    assert probes["recompile"]["state"] == "run" and "still compiling" in probes["recompile"]["why"], probes
    top = s["causes"][0]
    assert top["suspects"] == ["recompile"] and "dynamic=True fixes it" in top["narrative"], top
    assert s["fix"]["toggle"] == "dynamic=True", s["fix"]["toggle"]
    base = Run.from_dict(next(r for r in s["runs"] if r["role"] == "baseline"))
    called = (L / "recompile_cutoff_call.py").read_text()
    plan = door.ask("recompile", "plan", ctx=PlanContext(called, scan_source(called), False, base))
    assert plan.state == RUN and "still compiling" in plan.why, plan.why
    variant = plan.toggles[0].apply(called)
    ast.parse(variant)
    assert "_epilogue = torch.compile(backend=_slow_backend, dynamic=True)(_epilogue_eager)" in variant, variant


@pytest.mark.e2e
def test_a_warmup_helper_handed_the_kernel_is_a_warmup(tmp_path):
    res, s, probes = run(tmp_path, "warmup_helper", "--stages", "test", "--budget", "12", "--probes", "warmup")
    assert probes["warmup"]["state"] == "run" and "L19" in probes["warmup"]["why"], probes["warmup"]
    top = s["causes"][0]
    assert top["suspects"] == ["warmup"] and top["changes_outcome"], top
    assert s["fix"]["toggle"] == "warmup N->1"


def test_a_build_on_first_use_moves_to_import_where_the_compile_step_builds_it():
    from probes.build_at_import import NAME, build_at_import, why_not
    src = (FIXTURES / "state" / "inline_lazy.py").read_text()
    assert why_not(src) == ""
    moved = build_at_import(src)
    tree = ast.parse(moved)
    top = [n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == NAME]
    assert len(top) == 1 and "load_inline(name=\"diagnose_test_lazy_silu_mul\"" in ast.unparse(top[0]).replace("'", '"')
    main = next(i for i, n in enumerate(tree.body) if isinstance(n, ast.If))
    assert tree.body.index(top[0]) < main                # before the __main__ block: the compile step runs it
    method = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "__call__")
    assert f"self._ext = {NAME}" in ast.unparse(method) and "load_inline" not in ast.unparse(method)
    # a call that reads the function's own locals cannot move, and the reason names them
    local = src.replace("cpp_sources=[_SRC]", "cpp_sources=[r1.dtype and _SRC]")
    assert build_at_import(local) == local and "reads r1" in why_not(local)
    assert why_not((FIXTURES / "state" / "inline_ext.py").read_text()) is None     # built at import already


@pytest.mark.e2e
def test_an_extension_built_on_first_use_gets_the_compile_step_as_its_fix(tmp_path):
    """The build lands in the stage's first call and its budget runs out there; moved to import, the compile
    step builds it and the stage loads it: a verified fix, run cold in a container of its own."""
    out = tmp_path / "o"
    # the C++ build alone takes about 20 s on 2 cores; the stage that loads it built, a few. The compile step's
    # own limit is raised from the harness's 120 s: on a fresh clone's CI run, with two other C++ builds beside
    # it, the fix's build took 111.8 s and ran out (its solo rerun built in 77.5 s): flaky, so no verified fix
    res = cli("run", FIXTURES / "state" / "inline_lazy.py", "--stages", "compile,test", "--budget", "12",
              "--compile-budget", "400", "--probes", "extension_build", "--out", out, timeout=1200)
    s = json.loads((out / "session.json").read_text())
    v = s["verdict"]
    assert res.returncode == 1 and v["status"] == "timeout" and v["phase"].startswith("first_call"), res.stdout
    assert s["causes"][0]["suspects"] == ["extension_build"] and s["causes"][0]["changes_outcome"], s["causes"]
    assert s["fix"]["toggle"] == "built at import (the compile step builds it)", s["fix"]
    fix = next(r for r in s["runs"] if r["id"] == s["fix"]["run"])
    test = fix["stages"][0]
    step, stage = (step_builds(StageResult.from_dict(x)) for x in (test["compile_step"], test))   # the probe's facts
    assert test["status"] == "ok" and step[0]["built"], step
    assert not any(b["built"] for b in stage), stage      # the stage loaded it, built
