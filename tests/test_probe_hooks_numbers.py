"""The numerics and recompile probes' evidence travels as their own facts: each hook's events, read back by the
probe alone; a session of the schema before (StageResult.numerics, "recompile_start" events) reads the same."""
import types

from diagnose.runs.worker import imports, plugins
from diagnose.session import Run, StageResult
from probes.numerics import hook as numerics_hook, probe as numerics
from probes.numerics.facts import step_wrong
from probes.recompile import hook as recompile_hook
from probes.recompile.facts import recompile_records

WRONG = {"case": "n=4", "stats": {"elements": 4, "max_abs": 0.5, "max_rel": 0.25, "non_finite": 0, "rtol": 1e-3,
                                  "atol": 1e-3, "outside": 2, "worst": [{"index": [1], "got": 2.5, "expected": 2.0}]},
         "reference": {"default_dtype": "float64"}, "submission": {"default_dtype": "float32"}}


def _stage(**kw) -> StageResult:
    return StageResult.from_dict({"name": "test", "status": "wrong", **kw})


def test_an_old_sessions_numerics_field_reads_as_the_hooks_event():
    old, new = _stage(numerics=WRONG), _stage(probe_facts={"numerics": [{"event": "wrong", "t": 1.0, **WRONG}]})
    assert step_wrong(old) == step_wrong(new) == WRONG and step_wrong(_stage()) == {}
    mod = numerics
    assert mod.wrong_by(old) == ("max abs error 0.5, max rel error 0.25; 2 of 4 elements outside rtol=0.001 "
                                 "atol=0.001; worst at [1]: got 2.5, expected 2")
    lines = mod.failure(old)
    assert lines[0].startswith("Against the reference's own output (n=4): max abs error 0.5") and \
        "default_dtype: reference float64, submission float32" in lines[-2], lines
    base = Run(id="r0", role="baseline", probe=None, stages=[old])
    right = Run(id="r1", role="single", probe="numerics", stages=[_stage()])
    assert mod.measure(base, right) == (True, None, "r1 recorded no numeric settings (none are kept for a right "
                                                    "result)")


def _fake_torch():
    flags = types.SimpleNamespace(allow_tf32=False, deterministic=False, benchmark=False)
    backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=flags), cudnn=flags)
    return types.SimpleNamespace(backends=backends, Tensor=type("Tensor", (), {}),
                                 get_float32_matmul_precision=lambda: "highest",
                                 are_deterministic_algorithms_enabled=lambda: False,
                                 get_default_dtype=lambda: "torch.float32")


def test_the_numerics_hook_watches_the_reference_and_says_the_first_wrong_output_once():
    sent, api = [], types.SimpleNamespace(emit=lambda **f: sent.append(f))
    got = {}
    api.on_torch, api.on_phase = lambda fn: got.update(torch=fn), lambda fn: got.update(phase=fn)
    api.on_import, api.on_wrong = lambda name, fn: got.update({name: fn}), lambda fn: got.update(wrong=fn)
    numerics_hook.install(api)
    got["torch"](_fake_torch())
    ref = types.SimpleNamespace(ref_kernel=lambda data: [x * 2 for x in data])
    got["reference"](ref)
    assert ref.ref_kernel([1]) == [2]          # watched, and still the reference's answer
    got["phase"]("end", "first_call:n=4", {})
    got["wrong"](lambda data, out: (False, "no"), [1], [3], "n=4")
    got["wrong"](lambda data, out: (False, "no"), [1], [3], "n=4")
    assert [(e["event"], e["case"], e["stats"]) for e in sent] == [("wrong", "n=4", None)]
    assert sent[0]["reference"]["default_dtype"] == sent[0]["submission"]["default_dtype"] == "float32"


def test_a_wrong_output_and_a_module_the_worker_loads_itself_reach_the_hooks(monkeypatch):
    monkeypatch.setattr(plugins, "_WRONG", [])
    heard, ch = [], types.SimpleNamespace(emit=lambda *a, **k: heard.append(("error", a, k)))
    plugins.Api.on_wrong(lambda check, data, out, case: heard.append((data, out, case)))
    plugins.wrong(None, "data", "out", "n=4", ch)
    assert heard == [("data", "out", "n=4")]
    monkeypatch.setattr(imports, "_AFTER", {})
    module = types.SimpleNamespace()
    imports.after("reference_for_a_test", lambda m: setattr(m, "patched", True))
    imports.ran("reference_for_a_test", module)
    assert module.patched


def test_the_recompile_hook_says_a_recompile_as_it_starts_and_the_probe_reads_it_cut_off():
    sent = []
    cf = types.SimpleNamespace(get_and_maybe_log_recompilation_reasons=lambda cache, frame: ["size mismatch"])
    recompile_hook.patch(cf, types.SimpleNamespace(emit=lambda **f: sent.append(f)))
    recompile_hook.patch(cf, None)      # watched once
    code = types.SimpleNamespace(co_name="f", co_filename="submission.py", co_firstlineno=3)
    assert cf.get_and_maybe_log_recompilation_reasons(None, types.SimpleNamespace(f_code=code)) == ["size mismatch"]
    assert sent == [{"event": "start", "code": "f", "file": "submission.py", "line": 3, "reasons": ["size mismatch"]},
                    {"event": "starts", "n": 1, "slot": "starts"}]
    new = _stage(probe_facts={"recompile": [{"t": 1.0, **sent[0]}]})
    old = _stage(events=[{"k": "recompile_start", "t": 1.0, "pid": 1, **{k: v for k, v in sent[0].items()
                                                                       if k != "event"}}])
    for st in (new, old):
        assert recompile_records(Run(id="r0", role="baseline", probe=None, stages=[st])) == [
            {"stage": "test", "compile_id": None, "phase": None, "in_progress": True, "reason": "size mismatch",
             "code": "f"}]


def test_a_storm_of_recompiles_past_the_cap_on_a_probes_events_is_counted_whole():
    """The runner keeps 200 events of a probe per stage; a recompile storm starts more (461 in one H100 stage). The
    hook sends the first KEPT with their reasons and a running count in a slot, so the stage still counts them all."""
    from diagnose.runs.runner.child import ChildResult
    from diagnose.runs.runner.timeline import build_stage
    sent = []
    cf = types.SimpleNamespace(get_and_maybe_log_recompilation_reasons=lambda cache, frame: ["size mismatch"])
    recompile_hook.patch(cf, types.SimpleNamespace(emit=lambda **f: sent.append(f)))
    code = types.SimpleNamespace(co_name="f", co_filename="submission.py", co_firstlineno=3)
    for _ in range(461):
        cf.get_and_maybe_log_recompilation_reasons(None, types.SimpleNamespace(f_code=code))
    assert len(sent) > 200          # more than the runner keeps of a probe in a stage: this checks the cap
    evs = [{"k": "worker_start", "t": 1000.0, "pid": 7, "stage": "test"}]
    evs += [{"k": "probe", "probe": "recompile", "t": 1000.0 + i / 1000, "pid": 7, **f} for i, f in enumerate(sent)]
    st = build_stage("test", ChildResult(start_t=1000.0, wall_s=20.0, killed="deadline", kill_t=1010.0, events=evs),
                     20.0, "/x/submission.py")
    recs = recompile_records(Run(id="r0", role="baseline", probe=None, stages=[st]))
    assert len(recs) == 461 and all(r["in_progress"] for r in recs)
    assert sum(1 for r in recs if r["reason"] == "size mismatch") == recompile_hook.KEPT
