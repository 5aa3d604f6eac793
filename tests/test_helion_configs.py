"""The helion_configs probe, from the H200 runs committed in reports/examples/helion-configs-list (the folder's own
eval.py, HELION_DISALLOW_AUTOTUNING=1, a 48-config list): its plan from the baseline's and the tuning run's real
records, `took` on each run, the pinned file run against a stand-in for Helion's kernel object, and the hook
against a stand-in FiniteSearch (Helion needs a GPU)."""
from __future__ import annotations

import json
import types

from diagnose.session import Session
from probes.base import RUN, TUNE, PlanContext
from probes.door import scan as scan_source
from probes.helion_configs import hook, probe as helion_configs
from probes.helion_configs.evidence import chosen, searches, took
from tests.conftest import ROOT

EXAMPLE = ROOT / "reports" / "examples" / "helion-configs-list"
SOURCE = (ROOT / "tests" / "fixtures" / "gpu" / "helion_fp8_quant_configs.py").read_text(encoding="utf-8")


def _session() -> Session:
    return Session.from_dict(json.loads((EXAMPLE / "session.json").read_text(encoding="utf-8")))


def _ctx(s: Session, tuning: bool) -> PlanContext:
    return PlanContext(source=SOURCE, scan=scan_source(SOURCE), gpu=True, baseline=s.run("r1"),
                       tuning=s.run("r2") if tuning else None)


def test_the_baseline_searches_are_found_and_a_tuning_run_is_asked_for():
    s = _session()
    recs = searches(s.run("r1"))
    assert len(recs) == 4 and {r["configs"] for r in recs} == {48} and not recs[-1]["done"]
    plan = helion_configs.plan(_ctx(s, tuning=False))
    assert plan.state == TUNE and "48 configs" in plan.why and "the last cut off by the deadline" in plan.why


def test_the_plan_pins_each_shapes_choice_and_the_pinned_runs_took_it():
    s = _session()
    assert len(chosen(s.run("r2"))["quant_groups"]) == 8
    plan = helion_configs.plan(_ctx(s, tuning=True))
    assert plan.state == RUN and [t.removes for t in plan.toggles] == [True, False]
    assert "per shape" in plan.toggles[0].label and "one config" in plan.toggles[1].label
    base = s.run("r1")
    assert took(base, s.run("r3"))[0] is True and took(base, s.run("r4"))[0] is True
    gone, why = took(base, base)
    assert gone is False and "still searched its configs list 4 time(s)" in why


class _Bound:
    def __init__(self, args):
        self.args, self.config = args, None

    def set_config(self, config):
        self.config = config


class _Kernel:
    def __init__(self):
        self.bound = {}

    def bind(self, args):
        return self.bound.setdefault(tuple(a.shape for a in args), _Bound(args))

    def __call__(self, *args):
        return self.bind(args)


class _Array:
    def __init__(self, *shape):
        self.shape, self.dtype = shape, "torch.float32"


def test_the_pinned_file_gives_each_known_shape_its_config_before_the_first_call():
    s = _session()
    per_shape = helion_configs.plan(_ctx(s, tuning=True)).toggles[0].apply(SOURCE)
    compile(per_shape, "submission.py", "exec")
    fake = types.SimpleNamespace(Config=lambda **kw: kw)
    body = per_shape.split("def custom_kernel")[0]
    start = body.index("# The config Helion's search")
    ns = {"helion": fake, "quant_groups": _Kernel()}
    exec(body[start:], ns)   # noqa: S102 - the pinned text the probe wrote
    kernel = ns["quant_groups"]
    known = kernel(_Array(4, 64), _Array(4))          # the first test shape: (1, 256, 64) quantised in groups of 64
    assert known.config == chosen(s.run("r2"))["quant_groups"][(((4, 64), "float32"), ((4,), "float32"))]
    assert kernel(_Array(3, 64), _Array(3)).config is None   # a shape the tuning run never saw: searched as before


def test_the_hook_records_a_search_over_the_listed_configs_and_nothing_else():
    sent = []
    api = types.SimpleNamespace(emit=lambda **f: sent.append(f), phase="first_call:n=1",
                                on_import=lambda name, patch: patch(mod))

    class FiniteSearch:
        def __init__(self, kernel, args, configs):
            self.kernel, self.args, self.configs = kernel, args, configs

        def autotune(self):
            return types.SimpleNamespace(config={"block_sizes": [4], "num_warps": 2})

    class RandomSearch(FiniteSearch):
        pass

    mod = types.ModuleType("helion.autotuner.finite_search")
    mod.FiniteSearch = FiniteSearch
    hook.install(api)

    def code():
        pass
    bound = types.SimpleNamespace(kernel=types.SimpleNamespace(fn=code, configs=[1, 2, 3]))
    FiniteSearch(bound, (_Array(4, 64),), [1, 2, 3]).autotune()
    RandomSearch(bound, (_Array(4, 64),), [1, 2, 3]).autotune()      # a full autotuner built on it: not this
    assert [e["event"] for e in sent] == ["start", "end"]
    end = sent[1]
    assert end["configs"] == 3 and end["phase"] == "first_call:n=1" and end["kernel"] == "code"
    assert end["config"] == {"block_sizes": [4], "num_warps": 2} and end["key"] == repr((((4, 64), "float32"),))
