"""What a probe's plan hands its own worker hook (Plan.hook_args) reaches it as api.args, through the tuning run's
spec, with no field named for the probe; the search probe's hook reads the dicts its plan names at the tuning run's
end, and a session of the schema before (StageResult.memo) reads into the same facts."""
import json
import sys
import threading
import types

from diagnose.engine.planning import Planner
from diagnose.runs.protocol import WorkerSpec
from diagnose.runs.worker import plugins
from diagnose.session import Role, Run, Session, StageResult
from diagnose.status import Status
from probes.base import TUNE, Plan, PlanContext
from probes.door import scan as scan_source
from probes.search import probe as search
from probes.search.evidence import kept_places, scanned_dicts
from probes.search.hook import Hook
from tests.conftest import FIXTURES, ROOT


def test_the_planner_hands_each_asking_probes_args_to_the_tuning_run():
    launched = []
    pool = types.SimpleNamespace(session=None, settings=None, stop=threading.Event(),
                                 launch=lambda *a, **k: launched.append(k) or types.SimpleNamespace(note=""),
                                 wait=lambda run: False)
    planner = Planner(pool, types.SimpleNamespace(source="x = 1\n"), None)
    plans = {"search": Plan(TUNE, hook_args={"dicts": ["_BEST"]}), "helion_configs": Plan(TUNE)}
    assert planner.tune(plans, None) == {}
    assert launched[0]["stages"] == ["tune"] and launched[0]["hook_args"] == {"search": {"dicts": ["_BEST"]}}
    spec = WorkerSpec.from_json(WorkerSpec("s.py", "tune", {}, 1.0, "/r", "/s", hook_args=launched[0]["hook_args"])
                                .to_json())
    assert spec.hook_args == {"search": {"dicts": ["_BEST"]}}


def test_a_hook_is_installed_with_its_probes_args_and_others_get_none(tmp_path, monkeypatch):
    (tmp_path / "argshook.py").write_text("SEEN = []\ndef install(api):\n    SEEN.append(api.args)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ch = types.SimpleNamespace(emit=lambda *a, **k: None)
    plugins.load(["argshook"], ch, str(tmp_path / "submission.py"), {"argshook": {"dicts": ["_B"]}, "other": {}})
    plugins.load(["argshook"], ch, str(tmp_path / "submission.py"))
    import argshook
    assert argshook.SEEN == [{"dicts": ["_B"]}, {}]


def test_the_search_plan_names_the_scans_dicts_and_its_hook_reports_them_at_the_tuning_runs_end(monkeypatch):
    src = (FIXTURES / "search" / "hand_search.py").read_text()
    plan = search.plan(PlanContext(src, scan_source(src), False, Run("r0", None, Role.BASELINE)))
    assert plan.state == TUNE and plan.hook_args == {"dicts": ["_BEST"]}
    sub = types.ModuleType("submission")
    sub._BEST, sub._OBJS = {(4, 8): 2, (16, 8): 1}, {"a": object()}
    monkeypatch.setitem(sys.modules, "submission", sub)
    sent = []
    api = types.SimpleNamespace(args={"dicts": ["_BEST", "_OBJS", "_GONE"]}, emit=lambda **f: sent.append(f))
    Hook(api).stage_end("test")
    assert sent == []                         # only a tuning run's end
    Hook(api).stage_end("tune")
    assert sent[0] == {"what": "memo", "slot": "memo:_BEST", "name": "_BEST", "text": "{(4, 8): 2, (16, 8): 1}",
                       "entries": 2, "bytes": 23}
    assert "(object, str) cannot be written as constants" in sent[1]["error"]
    assert sent[2]["error"] == "`_GONE` is a NoneType at the end, not a dict"
    st = StageResult(name="tune", status=Status.OK, probe_facts={"search": sent})
    places, refused = kept_places(Run("r1", None, Role.TUNING, stages=[st]), [], ["_BEST", "_OBJS"])
    assert [p["path"] for p in places] == ["_BEST"] and "`_OBJS`: its keys and values" in refused[0]


def test_a_session_of_the_schema_before_reads_its_dicts_into_the_search_probes_facts():
    path = ROOT / "reports" / "examples" / "hand-search-triton" / "session.json"
    old = json.loads(path.read_text(encoding="utf-8"))
    kept = [m for r in old["runs"] if r["role"] == "tuning" for st in r["stages"] for m in st.get("memo") or []]
    assert kept, "the example holds no dict: this test checks nothing"
    tuning = next(r for r in Session.from_dict(old).runs if r.role == Role.TUNING)
    assert scanned_dicts(tuning) == [{"event": "memo", **m} for m in kept]
    # a stage whose hook also sent facts keeps them, the lifted records after them
    both = StageResult.from_dict({"name": "tune", "status": "ok", "memo": [{"name": "_B", "text": "{}"}],
                                  "probe_facts": {"search": [{"what": "kept", "path": "x"}]}})
    assert both.probe_facts["search"] == [{"what": "kept", "path": "x"}, {"event": "memo", "name": "_B", "text": "{}"}]
