"""Triton autotuning (CI has no GPU): the probe's worker hook on a stand-in for Triton's Autotuner, the runner
keeping each key's latest running record, the probe reading its records back (and an older session's, lifted),
and its toggles on a real @triton.autotune decorator."""
import ast
import json
import os
import types

import pytest

from diagnose.runs.runner.child import ChildResult
from diagnose.runs.runner.timeline import build_stage
from diagnose.session import Run, Session, StageResult
from diagnose.status import Status
from probes.autotune import hook, probe as autotune
from probes.autotune.facts import step_tunes
from probes.base import CANNOT_TOGGLE, RUN, PlanContext
from probes.door import scan as scan_source
from tests.conftest import FIXTURES, ROOT, cli

KERNEL = '''import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w, num_stages=s)
                          for b in (64, 128, 256, 512) for w in (2, 4, 8) for s in (1, 2, 3, 4)],
                 key=["n"])
@triton.jit
def _scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)


def custom_kernel(data):
    return data
'''


def _cfg(block, warps, stages):
    return {"kwargs": {"BLOCK": block}, "num_warps": warps, "num_stages": stages}


class _Config:
    """What the hook reads of a triton.Config."""
    def __init__(self, block, warps, stages):
        self.kwargs, self.num_warps, self.num_stages = {"BLOCK": block}, warps, stages


class _Tensor:
    dtype = "torch.float32"


class _Deadline(Exception):
    """The process ends here, inside a config's timing: nothing after it is said."""


class _Autotuner:
    """A stand-in for triton.runtime.autotuner.Autotuner: at a new key it times the configs its pruning keeps
    (each 1.5 s on the clock), keeps the fastest; the deadline comes after `stop_after` configs timed."""
    MS = {(64, 2, 1): 0.5, (128, 4, 2): 0.2, (256, 8, 3): 0.3, (512, 4, 1): 0.9, (128, 2, 2): 0.7}
    PRUNED = {1024: [(64, 2, 1), (128, 4, 2), (256, 8, 3)], 4096: [(512, 4, 1), (128, 2, 2), (256, 8, 3)]}

    def __init__(self, fn, clock, stop_after):
        self.base_fn, self.clock, self.stop_after, self.timed = fn, clock, stop_after, 0
        self.configs = [_Config(b, w, s) for b in (64, 128, 256, 512) for w in (2, 4, 8) for s in (1, 2, 3, 4)]
        self.arg_names, self.keys, self.cache = ["x_ptr", "out_ptr", "n"], ["n"], {}

    def run(self, *args, **kwargs):
        named = dict(zip(self.arg_names, args, strict=False))
        key = tuple([named[k] for k in self.keys] + [str(v.dtype) for v in named.values() if hasattr(v, "dtype")])
        if key not in self.cache:
            by = {(c.kwargs["BLOCK"], c.num_warps, c.num_stages): c for c in self.configs}
            got = {by[t]: self._bench(*args, config=by[t])[0] for t in self.PRUNED[named["n"]]}
            self.cache[key] = min(got, key=got.get)
        return key

    def _bench(self, *args, config, **meta):
        if self.timed == self.stop_after:
            raise _Deadline
        self.timed += 1
        self.clock[0] += 1.5
        return [self.MS[(config.kwargs["BLOCK"], config.num_warps, config.num_stages)]]


def _scale(x_ptr, out_ptr, n):
    """The kernel the stand-in tunes (a frame of this file: the submission, where the test says so)."""


def _events(monkeypatch, submission=__file__):
    """What the hook sends: two keys, the first tuned and then called again cached, the second cut off by the
    deadline after two configs."""
    clock, sent = [0.0], []
    monkeypatch.setattr(hook, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    api = types.SimpleNamespace(submission=os.path.realpath(submission), emit=lambda **f: sent.append(
        {"k": "probe", "probe": "autotune", "pid": 1, "t": 1000.0 + clock[0], **f}))
    mod = types.SimpleNamespace(Autotuner=type("Autotuner", (_Autotuner,), {}))
    assert hook.patch(mod, api) and not hook.patch(mod, api)        # watched once
    at, x = mod.Autotuner(_scale, clock, stop_after=5), _Tensor()
    assert at.run(x, None, 1024) == at.run(x, None, 1024) == (1024, "torch.float32")
    with pytest.raises(_Deadline):
        at.run(x, None, 4096)
    return sent


def _stage_from(events):
    child = ChildResult(start_t=events[0]["t"] - 1, wall_s=20.0, killed="deadline", kill_t=events[-1]["t"] + 1,
                        events=[{"k": "worker_start", "t": events[0]["t"] - 1, "pid": 1, "stage": "test"},
                                {"k": "begin", "t": events[0]["t"] - 0.5, "pid": 1, "name": "first_call:a"}] + events)
    return build_stage("test", child, 20.0, "/x/submission.py")


def test_the_hook_says_a_running_record_per_key_and_the_runner_keeps_its_latest(monkeypatch):
    sent = _events(monkeypatch)
    assert [(e["tried"], e["done"]) for e in sent] == [(1, False), (2, False), (3, False), (3, True), (1, False),
                                                       (2, False)]     # after each config timed, and at its end
    assert (sent[3]["configs"], sent[3]["calls"], sent[3]["parts"]) == (48, 1, ["1024", "torch.float32"])
    assert {e["slot"] for e in sent} == {"_scale|1024, torch.float32", "_scale|4096, torch.float32"}
    st = _stage_from(sent)
    assert st.status == Status.TIMEOUT
    # one record per key, not one per config; and none among the stage's events
    assert len(st.probe_facts["autotune"]) == 2 and not [e for e in st.events if e["k"] == "probe"]
    done, cut = step_tunes(st)
    assert (done["kernel"], done["key"], done["tried"], done["done"]) == ("_scale", "1024, torch.float32", 3, True)
    assert done["winner"] == _cfg(128, 4, 2) and (done["seconds"], done["tuning_s"]) == (4.5, 4.5)
    assert done["line"] == _scale.__code__.co_firstlineno        # the kernel is the submission's own
    assert (cut["tried"], cut["done"], cut["winner"], cut["seconds"]) == (2, False, None, 3.0)
    assert cut["best"] == {"config": _cfg(128, 2, 2), "ms": 0.7}      # the fastest it had timed
    assert autotune.records(st) == [done, cut]      # what its toggle's measure reads
    # a kernel of another file than the submission's: no line of the submission's
    assert [t["line"] for t in step_tunes(_stage_from(_events(monkeypatch, "/x/submission.py")))] == [None, None]


def test_two_processes_that_tuned_one_key_sum_as_the_configs_they_timed(monkeypatch):
    sent = _events(monkeypatch)
    pool = [{**e, "pid": 2} for e in sent[:4]]      # an evaluator's pool worker tuned the first key too
    done, cut = step_tunes(_stage_from(sorted(sent + pool, key=lambda e: e["t"])))
    assert (done["tried"], done["seconds"], done["done"], cut["tried"]) == (6, 9.0, True, 2)


def test_a_session_before_the_hook_reads_its_autotune_records_as_the_probes_facts():
    old = json.loads((ROOT / "reports" / "examples" / "triton-key-churn" / "session.json").read_text("utf-8"))
    stages = [st for r in old["runs"] for st in r["stages"] if st.get("autotune")]
    assert len(stages) >= 2 and any(len(st["autotune"]) > 100 for st in stages)
    for st in stages:
        assert step_tunes(StageResult.from_dict(st)) == st["autotune"]


def test_pinning_keeps_only_the_winners_of_a_real_autotune_decorator(monkeypatch):
    st = _stage_from(_events(monkeypatch))
    base = Run(id="r0", probe=None, outcome=Status.TIMEOUT, stages=[st])
    plan = autotune.plan(PlanContext(KERNEL, scan_source(KERNEL), gpu=False, baseline=base))
    assert plan.state == RUN and "5 configs compiled and timed in 7.5 s" in plan.why
    toggle, single = plan.toggles
    assert toggle.label == "autotune pinned to the 2 winning config(s)" and toggle.removes
    # two winners still tune both at every new key: one config tunes nothing (the winner of a finished key)
    assert single.label == "autotune pinned to one config per kernel"
    assert "configs=[triton.Config({'BLOCK': 128}, num_warps=4, num_stages=2)]" in single.apply(KERNEL)
    pinned = toggle.apply(KERNEL)
    tree = ast.parse(pinned)        # still a program
    dec = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)).decorator_list[0]
    configs = next(k.value for k in dec.keywords if k.arg == "configs")
    assert [ast.unparse(c) for c in configs.elts] == [
        "triton.Config({'BLOCK': 128}, num_warps=4, num_stages=2)",    # the winner of the finished key
        "triton.Config({'BLOCK': 128}, num_warps=2, num_stages=2)"]    # the best timed of the cut-off key
    assert "key=['n']" in pinned.replace('"', "'") and "@triton.jit" in pinned


def _churning(calls: int) -> list[dict]:
    """The hook's records when every call brings a new `step`, so the autotuner tunes again each time; `n` takes
    two values."""
    ev, t = [], 1000.0
    for i in range(calls):
        key = [str(1024 if i % 2 else 4096), str(i), "torch.float32"]
        t += 1.0
        ev.append({"k": "probe", "probe": "autotune", "t": t, "pid": 1, "event": "tuned",
                   "slot": f"_scale|{', '.join(key)}", "kernel": "_scale", "line": 9, "key": ", ".join(key),
                   "tried": 1, "seconds": 1.0, "best": {"config": _cfg(128, 4, 2), "ms": 0.2},
                   "winner": _cfg(128 if i % 3 else 64, 4, 2), "done": True, "configs": 48, "tuning_s": 1.0,
                   "calls": i + 1, "parts": key})
    return ev


def test_a_key_argument_that_changes_on_every_call_is_named_and_dropped():
    churning = KERNEL.replace('key=["n"]', 'key=["n", "step"]').replace("n, BLOCK", "n, step, BLOCK")
    base = Run(id="r0", probe=None, outcome=Status.TIMEOUT, stages=[_stage_from(_churning(25))])
    plan = autotune.plan(PlanContext(churning, scan_source(churning), gpu=False, baseline=base))
    assert "key argument `step` of _scale took 25 values in 25 calls" in plan.why, plan.why
    assert plan.evidence["churn"] == [{"kernel": "_scale", "arg": "step", "values": 25, "calls": 25}]
    labels = [t.label for t in plan.toggles]
    assert labels == ["autotune pinned to the 2 winning config(s)", "autotune pinned to one config per kernel",
                      "key without step"], labels
    dropped = plan.toggles[-1].apply(churning)
    ast.parse(dropped)
    assert "key=['n']" in dropped and "configs=[triton.Config" in dropped     # only the key changed
    # the config that won most keys: BLOCK 128 won 16 of 25
    assert "configs=[triton.Config({'BLOCK': 128}, num_warps=4, num_stages=2)]" in plan.toggles[1].apply(churning)


def test_a_key_that_repeats_is_no_churn():
    ev = [e for e in _churning(25)]
    for e in ev:
        e["calls"] = 400      # 25 keys over 400 calls: tuned once per key, then cached
    base = Run(id="r0", probe=None, outcome=Status.TIMEOUT, stages=[_stage_from(ev)])
    churning = KERNEL.replace('key=["n"]', 'key=["n", "step"]')
    plan = autotune.plan(PlanContext(churning, scan_source(churning), gpu=False, baseline=base))
    assert plan.evidence["churn"] == [] and not any("key without" in t.label for t in plan.toggles)


def test_configs_by_name_are_pinned_and_an_autotuner_made_by_a_call_cannot_be(monkeypatch):
    base = Run(id="r0", probe=None, outcome=Status.TIMEOUT, stages=[_stage_from(_events(monkeypatch))])
    named = KERNEL.replace("@triton.autotune(configs=[", "_C = [").replace("                 key=[\"n\"])\n", "")
    named = named.replace("for s in (1, 2, 3, 4)],",
                          "for s in (1, 2, 3, 4)]\n\n\n@triton.autotune(configs=_C, key=['n'])")
    plan = autotune.plan(PlanContext(named, scan_source(named), gpu=False, baseline=base))
    assert plan.state == RUN
    assert "@triton.autotune(configs=[triton.Config({'BLOCK': 128}, num_warps=4" in plan.toggles[0].apply(named)
    # the autotuner made by calling triton.autotune(...) on a jitted function: nothing in the source to edit
    called = KERNEL.replace("@triton.autotune(", "_tune = dict(").replace("@triton.jit\ndef _scale", "def _scale_raw")
    called += "\n_scale = triton.autotune(**_tune)(triton.jit(_scale_raw))\n"
    ast.parse(called)
    plan = autotune.plan(PlanContext(called, scan_source(called), gpu=False, baseline=base))
    assert plan.state == CANNOT_TOGGLE and "no @triton.autotune" in plan.why, (plan.state, plan.why)


@pytest.mark.e2e
def test_a_tuning_the_deadline_cuts_off_still_shows_what_it_had_timed(tmp_path):
    """Through a real worker: the hook wraps the autotuner as the submission imports it, says its record after
    each config, and the deadline (8 s, in a tuning of 20 s) finds the configs timed so far and the best of them."""
    out = tmp_path / "o"
    cli("run", FIXTURES / "lib" / "triton_standin.py", "--stages", "test", "--budget", "8", "--probes", "autotune",
        "--out", out)
    s = Session.from_dict(json.loads((out / "session.json").read_text()))
    st = s.baseline.stage("test")
    assert st.status == Status.TIMEOUT and not [e for e in st.events if e["k"] == "probe"], st.status
    (cut,) = step_tunes(st)
    assert cut["kernel"] == "_gemm" and not cut["done"] and 1 <= cut["tried"] < 40, cut
    # the fastest timed: BLOCK 32 (0.64 ms) for the first 8 configs, BLOCK 64 (0.32 ms) from the ninth
    assert cut["line"] == 46 and cut["best"]["ms"] == (0.64 if cut["tried"] <= 8 else 0.32), cut
    assert any("|triton_autotune" in k for ph in st.samples.values() for k in ph.get("mechanisms", {})), st.samples
    report = (out / "report.md").read_text()
    assert "## Autotuning" in report and "cut off; best so far" in report
