"""The graph_capture probe keeps its evidence: its worker hook says each CUDA graph capture as it begins and ends, and
who began it; the runner keeps those events untouched; the probe reads them back into captures, the spans the trace
and the first call's split read (through the `spans` hook), and its measure of what a toggle took away. A schema-4
session's StageResult.captures is read into the same facts."""
import json
import types

from diagnose.analysis.effects.effects import effect
from diagnose.analysis.verdict import summary
from diagnose.runs.runner.child import ChildResult
from diagnose.runs.runner.timeline import build_stage
from diagnose.session import Phase, Session, StageResult
from probes import door
from probes.graph_capture import hook
from probes.graph_capture.facts import compiled_inside_capture, outer_captures, step_captures
from tests.builders import run, session
from tests.conftest import ROOT


class _Graph:
    """torch.cuda.CUDAGraph's two methods the hook wraps, recording that they ran."""
    calls: list = []

    def capture_begin(self, pool=None):
        self.calls.append(("begin", pool))

    def capture_end(self):
        self.calls.append(("end",))
        raise RuntimeError("capture failed")


def _from(path: str, body: str):
    """A function whose frames say they are in `path` (torch's own files, as the hook tells them apart)."""
    ns: dict = {}
    exec(compile(f"def call(g, f):\n    {body}\n", path, "exec"), ns)
    return ns["call"]


def test_the_hook_says_who_began_each_capture_and_leaves_the_capture_as_it_was():
    sent = []
    api = types.SimpleNamespace(phase="first_call:a", emit=lambda **f: sent.append(f))
    cls = type("CUDAGraph", (_Graph,), {})
    assert hook.patch(cls, api) and not hook.patch(cls, api)      # wrapped once
    g = cls()
    g.capture_begin(pool=7)                                      # the submission's own call
    trees = _from("/env/site-packages/torch/_inductor/cudagraph_trees.py", "g.capture_begin()")
    trees(g, None)                                               # cudagraph trees'
    graph_ctx = _from("/env/site-packages/torch/cuda/graphs.py", "f(g)")
    graph_ctx(g, lambda g: g.capture_begin())                    # torch.cuda.graph's frames are skipped: the caller's
    try:
        g.capture_end()
    except RuntimeError:
        pass
    assert _Graph.calls[:2] == [("begin", 7), ("begin", None)] and _Graph.calls[-1] == ("end",)
    assert [(e["event"], e.get("origin"), e["depth"]) for e in sent] == [
        ("begin", "outer", 1), ("begin", "inductor", 2), ("begin", "outer", 3), ("end", None, 3)]
    assert {e["phase"] for e in sent} == {"first_call:a"}


def test_the_hook_waits_for_torch_and_leaves_a_machine_without_cuda_alone():
    asked = []
    api = types.SimpleNamespace(on_torch=asked.append, emit=None, phase=None)
    hook.install(api)
    cls = type("CUDAGraph", (_Graph,), {})
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False, CUDAGraph=cls))
    asked[0](torch)
    assert cls.capture_begin is _Graph.capture_begin


def _probe(t, **fields):
    return {"k": "probe", "probe": "graph_capture", "pid": 1, "t": t, **fields}


def test_the_runner_keeps_the_events_and_the_probe_pairs_them_into_captures_open_ones_last():
    evs = [_probe(1003.0, event="begin", origin="outer", phase="first_call:a", depth=1),
           _probe(1003.5, event="begin", origin="inductor", phase="first_call:a", depth=2),
           _probe(1004.0, event="end", phase="first_call:a", depth=2),
           _probe(1004.5, event="begin", phase="first_call:a", depth=2)]      # no origin: a forged claim, dropped
    child = ChildResult(start_t=1000.0, wall_s=20.0, killed="deadline", kill_t=1010.0,
                        events=[{"k": "worker_start", "t": 1000.0, "pid": 1, "stage": "test"},
                                {"k": "begin", "t": 1002.0, "pid": 1, "name": "first_call:a"}] + evs)
    st = build_stage("test", child, 20.0, "/x/submission.py")
    assert st.start_t == 1000.0
    assert step_captures(st) == [
        {"origin": "inductor", "phase": "first_call:a", "start_s": 3.5, "end_s": 4.0},
        {"origin": "outer", "phase": "first_call:a", "start_s": 3.0, "end_s": None}]      # open when it was stopped
    spans = door.ask("graph_capture", "spans", step=st)
    assert [(s["name"], s["own"]) for s in spans] == [("capture (inductor)", False), ("capture (outer)", True)]
    r = run("r0")
    r.stages = [st]
    assert outer_captures(r) == 1
    assert compiled_inside_capture(r) == ["test: cudagraph trees captured inside the outer capture in first_call:a"]


def test_the_first_call_counts_the_probes_own_spans_as_capturing_and_the_trace_draws_them_all():
    st = StageResult(name="test", status="ok", wall_s=10.0, phases=[Phase("first_call:a", 2.0, 6.0)],
                     probe_facts={"graph_capture": [
                         {"event": "capture", "origin": "outer", "phase": "first_call:a", "start_s": 3.0,
                          "end_s": None},
                         {"event": "capture", "origin": "inductor", "phase": "first_call:a", "start_s": 2.5,
                          "end_s": 2.75}]})
    fc = summary.first_call(st)
    assert (fc["total_s"], fc["capture_s"], fc["rest_s"]) == (4.0, 3.0, 1.0)     # the outer one, open to the end
    r = run("r0")
    r.stages = [st]
    from diagnose.output import trace
    drawn = [e for e in json.loads(trace.render(session([r])))["traceEvents"] if e["name"].startswith("capture")]
    assert [(e["name"], e["ts"], e["dur"]) for e in drawn] == [("capture (outer)", 3e6, 7e6),
                                                               ("capture (inductor)", 2.5e6, 0.25e6)]


def test_its_toggle_is_measured_by_its_own_measure():
    base, gone = run("r0"), run("r1", probe="graph_capture", toggle="capture off")
    s = session([base, gone])
    e = effect(s, base, gone)
    assert (e.reached, e.removed) == (True, True) and "outer captures 1 in r0, 0 in r1" in e.what
    kept = run("r2", probe="graph_capture", toggle="capture off", acted=False)
    assert effect(session([base, kept]), base, kept).removed is False


def test_a_session_of_schema_4_reads_its_captures_into_the_probes_facts():
    path = ROOT / "reports" / "examples" / "round9" / "session.json"
    old = json.loads(path.read_text(encoding="utf-8"))
    assert old["schema_version"] <= 4          # written while the captures were a StageResult field
    kept = [c for r in old["runs"] if r["role"] == "baseline" for st in r["stages"] for c in st.get("captures") or []]
    assert any(c["origin"] == "outer" for c in kept), "the example holds no outer capture: this test checks nothing"
    s = Session.from_dict(old)
    read = [c for st in s.baseline.stages for c in step_captures(st)]
    assert read == kept
    saved = json.loads(s.to_json())
    assert "captures" not in saved["runs"][0]["stages"][0]
    assert [c for st in Session.from_dict(saved).baseline.stages for c in step_captures(st)] == read
