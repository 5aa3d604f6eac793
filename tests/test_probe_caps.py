"""What the runner keeps of a probe's events (runner/stage_facts.py): any process of a run can write them, so they
are capped per probe and stage; a probe's running records (slots) are kept apart from its events, so that a flood
of events, its own or a forger's, never pushes out the records a conclusion reads."""
import types

from diagnose.runs.runner.stage_facts import PROBE_FACTS_CAP, PROBE_SLOTS_CAP, fill_probes
from diagnose.runs.worker import plugins
from diagnose.session import Run, StageResult
from diagnose.status import Status
from probes.recompile.facts import recompile_records
from probes.search.evidence import scanned_dicts


def _ev(probe: str, pid: int = 7, **f) -> dict:
    return {"k": "probe", "probe": probe, "t": 1.0, "pid": pid, **f}


def test_a_flood_of_events_keeps_the_running_records_and_another_probes():
    st = StageResult("tune", Status.OK)
    flood = [_ev("search", what="searching", n=i) for i in range(PROBE_FACTS_CAP + 500)]
    memo = _ev("search", what="memo", slot="memo:_BEST", name="_BEST", text="{}", entries=0, bytes=2, error=None)
    fill_probes(st, flood + [memo, _ev("recompile", event="start", code="f")])
    kept = st.probe_facts["search"]
    assert len(kept) == PROBE_FACTS_CAP + 1 and kept[-1]["what"] == "memo"
    assert [m["name"] for m in scanned_dicts(Run("t", "tuning", None, stages=[st]))] == ["_BEST"]
    assert st.probe_facts["recompile"] == [{"t": 1.0, "event": "start", "code": "f"}]


def test_slots_are_capped_too_and_the_latest_of_one_replaces_it_where_it_stood():
    st = StageResult("test", Status.OK)
    evs = [_ev("autotune", slot=f"k{i}", tried=1) for i in range(PROBE_SLOTS_CAP + 10)]
    evs.append(_ev("autotune", slot="k0", tried=5))
    fill_probes(st, evs)
    kept = st.probe_facts["autotune"]
    assert len(kept) == PROBE_SLOTS_CAP and kept[0]["tried"] == 5


def test_a_forged_count_of_recompiles_is_no_count():
    for n in ("x", -3, 10**9, 2.5):
        st = StageResult("test", Status.TIMEOUT, probe_facts={"recompile": [{"event": "starts", "n": n}]})
        assert recompile_records(Run("r0", "baseline", None, stages=[st])) == [], n
    st = StageResult("test", Status.TIMEOUT, probe_facts={"recompile": [{"event": "starts", "n": 3, "slot": "s"}]})
    assert len(recompile_records(Run("r0", "baseline", None, stages=[st]))) == 3


def test_a_hook_that_raises_is_dropped_and_its_probe_says_so_once(monkeypatch):
    said = []
    ch = types.SimpleNamespace(emit=lambda kind, **f: said.append(f))

    def boom(stage):
        raise RuntimeError("no")
    boom.__module__ = "probes.search.hook"
    fns = [boom]
    plugins._call(fns, ("tune",), ch, "at the stage's end")
    plugins._call(fns, ("tune",), ch, "at the stage's end")
    assert fns == [] and len(said) == 1 and said[0]["probe"] == "search" and "RuntimeError: no" in said[0]["error"]
