"""Searches that run at run time, pinned in the source from a tuning run: Helion configs (per-shape table, or
the decorator), a search written by hand (its dict filled in advance), and the evaluator's rules as causes."""
from __future__ import annotations

import ast
import json
from pathlib import Path

from diagnose.findings import rule_in
from diagnose.session import Role, Run, StageResult
from diagnose.status import Status
from diagnose.tasks.rules import evaluator_rules
from probes.base import CANNOT_TOGGLE, RUN, TUNE, PlanContext
from probes.door import scan as scan_source
from probes.helion import probe as helion_config
from probes.search import probe as search_pin

FIXTURES = Path(__file__).parent / "fixtures"
TABLE = (FIXTURES / "helion" / "table_no_config.py").read_text()
CFG_A = {"block_sizes": [4], "num_warps": 4, "num_stages": 2}
CFG_B = {"block_sizes": [16], "num_warps": 8, "num_stages": 3}


def _run(rid: str, role: Role, st: StageResult) -> Run:
    return Run(id=rid, probe=None, role=role, stages=[st], outcome=st.status)


def _disallowed_baseline() -> Run:
    st = StageResult(name="test", status=Status.CRASH, message="AutotuningDisallowedInEnvironment: Autotuning is "
                     "disabled by HELION_DISALLOW_AUTOTUNING=1, please provide a config",
                     exception={"type": "AutotuningDisallowedInEnvironment"})
    return _run("r0", Role.BASELINE, st)


def _tuning(records: list[dict]) -> Run:
    # each search as the helion probe's hook reports its end (probes/helion/hook.py)
    st = StageResult(name="tune", status=Status.OK, probe_facts={"helion": [{"event": "tuned", **r} for r in records]})
    return _run("r1", Role.TUNING, st)


RULES = [{"name": "HELION_DISALLOW_AUTOTUNING", "value": "1", "file": "eval.py", "line": 526}]


def _rec(case: str, cfg: dict, kernel: str = "scale") -> dict:
    return {"kernel": kernel, "case": f"tune:{case}", "shape": "?", "seconds": 9.0, "config": cfg, "done": True}


def test_helion_kernel_and_table_are_found_with_their_spans():
    helion = scan_source(TABLE).of("helion")
    table = scan_source(TABLE).of("helion_table")
    assert [s.details["kernel"] for s in helion] == ["scale"] and not helion[0].details["config"]
    assert helion[0].details["factory"] == "_make" and helion[0].details["config_param"] == "config"
    assert table[0].details["name"] == "CONFIGS" and [e["key"] for e in table[0].details["entries"]] == [(1, 256),
                                                                                                       (8, 4096)]


def test_a_harness_rule_asks_for_a_tuning_run_then_pins_each_shape_into_the_table():
    """Under the evaluator's rule the baseline crashes at the first search: the probe names the rule and asks
    for a tuning run; with its records, the pin writes each shape's config into the table (a shape the table
    lacks is added) and passes the factory's config to the decorator."""
    ctx = PlanContext(TABLE, scan_source(TABLE), True, _disallowed_baseline(), rules=RULES)
    first = helion_config.plan(ctx)
    assert first.state == TUNE and "eval.py L526 sets HELION_DISALLOW_AUTOTUNING=1" in first.why, first.why
    recs = [_rec("rows=1,cols=256", CFG_A), _rec("rows=8,cols=4096", CFG_B), _rec("rows=64,cols=4096", CFG_B)]
    ctx.tuning = _tuning(recs)
    p = helion_config.plan(ctx)
    assert p.state == RUN and p.toggles[0].label.startswith("Helion configs pinned per shape in CONFIGS (3 shapes, +")
    out = p.toggles[0].apply(TABLE)
    tree = ast.parse(out)
    table = next(n for n in tree.body if isinstance(n, ast.AnnAssign))
    entries = {ast.literal_eval(k): ast.unparse(v) for k, v in zip(table.value.keys, table.value.values, strict=True)}
    assert entries[(1, 256)] == "helion.Config(block_sizes=[4], num_stages=2, num_warps=4)"
    assert entries[(8, 4096)] == entries[(64, 4096)] == "helion.Config(block_sizes=[16], num_stages=3, num_warps=8)"
    assert "@helion.kernel(static_shapes=True, config=config)" in out
    # the other strategy: the most common config on the decorator; never configs=[the distinct ones], which Helion
    # would search again at every new shape (the helion_configs probe's mechanism)
    labels = [t.label for t in p.toggles]
    assert len(labels) == 2 and not any("configs" in lb.split("pinned")[1].split("(")[0] for lb in labels), labels
    one = next(t for t in p.toggles if "one config" in t.label).apply(TABLE)
    assert "@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16]" in one
    assert [t.removes for t in p.toggles] == [True] + [False] * (len(p.toggles) - 1)


def test_a_decorator_without_a_table_takes_one_config_never_a_list():
    src = (FIXTURES / "gpu" / "helion_no_config.py").read_text()
    ctx = PlanContext(src, scan_source(src), True, _disallowed_baseline(), tuning=_tuning(
        [_rec("m=64,n=128", CFG_A, "silu_mul"), _rec("m=128,n=64", CFG_B, "silu_mul")]))
    p = helion_config.plan(ctx)
    assert len(p.toggles) == 1
    pinned = p.toggles[0].apply(src)
    assert "configs=" not in pinned and pinned.count("helion.Config(") == 1
    compile(pinned, "x", "exec")
    bare = src.replace("@helion.kernel(static_shapes=True)", "@helion.kernel")
    one = helion_config.pin_decorator(bare, "silu_mul", json.dumps([CFG_A]))
    assert "@helion.kernel(config=helion.Config(block_sizes=[4], num_stages=2, num_warps=4))" in one


def test_a_pin_over_the_size_cap_is_not_offered():
    huge = {"block_sizes": [1], "pad": "x" * 1_100_000}
    ctx = PlanContext(TABLE, scan_source(TABLE), True, _disallowed_baseline(), tuning=_tuning(
        [_rec("rows=1,cols=256", huge)]))
    p = helion_config.plan(ctx)
    assert p.state == CANNOT_TOGGLE and "over KernelBot's 1 MB cap" in p.why, p.why


def test_a_tuning_run_that_found_nothing_says_why():
    ctx = PlanContext(TABLE, scan_source(TABLE), True, _disallowed_baseline(), tuning=_tuning(
        [{"kernel": "scale", "case": "tune:rows=1,cols=256", "config": None, "done": False, "seconds": 3.0,
          "error": "OutOfResources: shared memory"}]))
    p = helion_config.plan(ctx)
    assert p.state == CANNOT_TOGGLE and "found no config: OutOfResources: shared memory" in p.why


def test_the_evaluators_rules_are_read_from_its_source(tmp_path):
    ev = tmp_path / "eval.py"
    ev.write_text('import os\nX = 1\ndef main():\n    os.environ["HELION_DISALLOW_AUTOTUNING"] = "1"\n'
                  '    os.environ.setdefault("CUTE_DSL_DISABLE_FILE_CACHING", "1")\n    os.environ[name] = "dyn"\n')
    rules = evaluator_rules(ev)
    assert rules == [{"name": "HELION_DISALLOW_AUTOTUNING", "value": "1", "file": "eval.py", "line": 4},
                     {"name": "CUTE_DSL_DISABLE_FILE_CACHING", "value": "1", "file": "eval.py", "line": 5}]
    assert rule_in(rules, "disabled by HELION_DISALLOW_AUTOTUNING=1")["line"] == 4
    assert rule_in(rules, "some other failure") is None
    assert evaluator_rules(tmp_path / "missing.py") == []


def test_a_search_that_kept_objects_cannot_be_pinned():
    src = (FIXTURES / "search" / "hand_search.py").read_text()
    # what the search probe's hook sent of the dict its plan named (probes/search/hook.py, at the tuning run's end)
    st = StageResult(name="tune", status=Status.OK, probe_facts={"search": [
        {"what": "memo", "name": "_BEST", "entries": 3,
         "error": "its keys and values (function, tuple) cannot be written"}]})
    p = search_pin.plan(PlanContext(src, scan_source(src), False, _run("r0", Role.BASELINE, st),
                                    tuning=_run("r1", Role.TUNING, st)))
    assert p.state == CANNOT_TOGGLE and "`_BEST`: its keys and values (function, tuple)" in p.why


def test_a_message_whose_template_was_applied_twice_reads_once():
    from diagnose.runs.runner.sites import undouble
    twice = ("Autotuning is disabled Autotuning is disabled by HELION_DISALLOW_AUTOTUNING=1, please provide a config "
             "to @helion.kernel via the config= argument., please provide a config to @helion.kernel via the config= "
             "argument.")
    assert undouble(twice) == ("Autotuning is disabled by HELION_DISALLOW_AUTOTUNING=1, please provide a config to "
                               "@helion.kernel via the config= argument.")
    once = "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert undouble(once) == once


def test_a_harness_rule_with_no_verified_fix_is_named_as_the_rule_with_the_strategies_tried():
    """No toggle fixed it: the cause is the evaluator's rule (where it is set), not "a bug in the code", and it
    lists what was tried and how each ended instead of "no probe found a suspect"."""
    from diagnose.analysis.audit.audit import audit
    from diagnose.analysis.causes import bisector
    from diagnose.analysis.verdict import summary
    from tests.builders import run, session
    exc = {"type": "AutotuningDisallowedInEnvironment", "message": "disabled by HELION_DISALLOW_AUTOTUNING=1"}
    s = session([run("r0", outcome="crash", fail_at="test", exception=exc,
                     site={"file": "/tmp/x/submission.py", "line": 7, "func": "custom_kernel"}),
                 run("r1", "warmup", "warmup N->1", outcome="crash", fail_at="test")])
    s.runs[0].failed_stage.message = "AutotuningDisallowedInEnvironment: disabled by HELION_DISALLOW_AUTOTUNING=1"
    s.harness["rules"] = RULES
    s.probes = [{"name": "warmup", "state": RUN, "why": "", "evidence": {}, "toggles": ["warmup N->1"]},
                {"name": "helion", "state": CANNOT_TOGGLE, "why": "the tuning run r2 found no config: OutOfResources",
                 "evidence": {}, "toggles": []}]
    bisector.minimal_set(s, ["warmup"], fails=lambda keep: True)
    bisector.conclude(s)
    s.verdict = summary.verdict(s)
    top = s.causes[0]
    assert top.kind == "harness_rule", top
    assert "eval.py line 526 sets HELION_DISALLOW_AUTOTUNING=1" in top.narrative and "not a bug" in top.narrative
    assert "the strategies tried did not fix it: warmup N->1 (r1) ended crash in test" in top.narrative
    assert "helion cannot toggle: the tuning run r2 found no config" in top.narrative
    assert audit(s) == [], [str(f) for f in audit(s)]


def test_a_disk_cached_autotune_is_tuned_by_the_compile_steps_warm_up():
    """cache_results=True on every @triton.autotune (set, or turned on where it was False), and a __main__
    block that runs each distinct shape once; a block the file has keeps its own statements first."""
    from probes.autotune.probe import cache_on_disk
    src = (FIXTURES / "gpu" / "triton_autotune.py").read_text()
    cases = json.dumps([{"m": 64, "n": 128, "k": 256, "seed": 1}, {"m": 64, "n": 128, "k": 256, "seed": 2},
                        {"m": 32, "n": 96, "k": 64, "seed": 3}])
    out = cache_on_disk(src, cases)
    tree = ast.parse(out)
    dec = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)).decorator_list[0]
    assert {k.arg: ast.unparse(k.value) for k in dec.keywords}["cache_results"] == "True"
    main = tree.body[-1]
    assert isinstance(main, ast.If) and "__main__" in ast.unparse(main.test)
    loop = next(n for n in main.body if isinstance(n, ast.For))
    assert [c["seed"] for c in ast.literal_eval(loop.iter)] == [1, 3]      # one per shape
    off = src.replace('key=["n"])', 'key=["n"], cache_results=False)')
    assert 'cache_results=True)' in cache_on_disk(off, cases) and "cache_results=False" not in cache_on_disk(off, cases)
    own = src + '\n\nif __name__ == "__main__":\n    print("own")\n'
    mine = ast.parse(cache_on_disk(own, cases)).body[-1]
    assert ast.unparse(mine.body[0]) == "print('own')" and len([n for n in ast.parse(cache_on_disk(own, cases)).body
                                                                if isinstance(n, ast.If)]) == 1
