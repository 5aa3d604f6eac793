"""A probe's evidence travels as its own facts: its hook's events, kept by the runner untouched in the stage's
probe_facts, read back by the probe alone. A session of the schema before (its per-probe fields) is read into the
same facts, so an old session reads as a new one does."""
import json
import types

from diagnose.runs.runner.child import ChildResult
from diagnose.runs.runner.timeline import build_stage
from diagnose.session import SCHEMA_VERSION, Session, StageResult
from probes import door
from probes.extension_build import hook
from probes.extension_build.facts import builds, step_builds
from tests.conftest import ROOT


def _fake_cpp_extension(tmp_path, fail_second=False):
    """A torch.utils.cpp_extension stand-in whose _jit_compile writes a .ninja_log as ninja does."""
    calls = []

    def _jit_compile(name, sources, extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_paths,
                     build_directory, verbose, with_cuda, is_python_module, is_standalone, keep_intermediates=True):
        calls.append(name)
        (tmp_path / ".ninja_log").write_text("# ninja log v5\n0\t1500\t0\tmain.o\tx\n1500\t2000\t0\tm.so\ty\n")
        if fail_second and len(calls) == 2:
            raise RuntimeError("nvcc failed")
        return f"module {name}"
    return types.SimpleNamespace(_jit_compile=_jit_compile)


def _hooked(tmp_path, **kw):
    sent = []
    mod = _fake_cpp_extension(tmp_path, **kw)
    assert hook.patch(mod, lambda **fields: sent.append({"k": "probe", "probe": "extension_build", "pid": 1,
                                                          "t": 1000.0 + len(sent), **fields}))
    assert not hook.patch(mod, None)        # watched once
    return mod, sent


def test_the_hook_says_each_build_as_it_starts_and_ends_and_leaves_its_result(tmp_path):
    mod, sent = _hooked(tmp_path, fail_second=True)
    args = (["a.cu"], ["-O3"], ["-lineinfo"], [], [], str(tmp_path), False, True, True, False)
    assert mod._jit_compile("ext", *args) == "module ext"
    try:
        mod._jit_compile("ext2", *args)
    except RuntimeError:
        pass
    assert [e["event"] for e in sent] == ["start", "built", "start", "built"]
    done = sent[1]
    assert (done["name"], done["ok"], done["cuda_cflags"], done["found_lock"]) == ("ext", True, ["-lineinfo"], False)
    assert done["built"] == [{"output": "main.o", "seconds": 1.5}, {"output": "m.so", "seconds": 0.5}]
    assert sent[3]["ok"] is False


def _probe_event(t, **fields):
    return {"k": "probe", "probe": "extension_build", "pid": 1, "t": t, **fields}


def test_the_runner_keeps_the_hooks_events_and_the_probe_reads_its_builds_back():
    evs = [_probe_event(1001.0, event="start", name="ext", found_lock=False),
           _probe_event(1003.0, event="built", name="ext", ok=True, seconds=2.0, found_lock=False,
                        built=[{"output": "m.so", "seconds": 2.0}]),
           _probe_event(1004.0, event="start", name="late", found_lock=True)]
    child = ChildResult(start_t=1000.0, wall_s=20.0, killed="deadline", kill_t=1010.0,
                        events=[{"k": "worker_start", "t": 1000.0, "pid": 1, "stage": "test"},
                                {"k": "begin", "t": 1000.5, "pid": 1, "name": "submission_import"}] + evs)
    st = build_stage("test", child, 20.0, "/x/submission.py")
    assert [r["event"] for r in st.probe_facts["extension_build"]] == ["start", "built", "start"]
    done, cut = step_builds(st)
    assert (done["name"], done["ok"], done["built"]) == ("ext", True, [{"output": "m.so", "seconds": 2.0}])
    # still building when the deadline stopped the process: timed up to that stop, its lock found
    assert (cut["name"], cut["ok"], cut["seconds"], cut["found_lock"]) == ("late", None, 6.0, True)
    assert door.ask("extension_build", "records", step=st) == [done, cut]        # what its toggle's measure reads


def test_a_session_of_the_schema_before_reads_its_builds_into_the_probes_facts():
    path = ROOT / "reports" / "examples" / "inline-cuda-killed" / "session.json"
    old = json.loads(path.read_text(encoding="utf-8"))
    assert old["schema_version"] == 3 < SCHEMA_VERSION      # written before builds left StageResult
    kept = [b for r in old["runs"] if r["role"] == "baseline" for st in r["stages"]
            for step in (st.get("compile_step"), st) if step for b in step.get("builds") or []]
    assert kept, "the example holds no build: this test checks nothing"
    session = Session.from_dict(old)
    read = builds(session.baseline)
    assert [(b["name"], b["ok"], b["seconds"]) for b in read] == [(b["name"], b["ok"], b["seconds"]) for b in kept]
    again = Session.from_dict(json.loads(session.to_json()))       # saved under the new schema, the same facts
    assert "builds" not in json.loads(session.to_json())["runs"][0]["stages"][0]
    assert builds(again.baseline) == read
    assert StageResult.from_dict({"name": "x", "status": "ok", "builds": []}).probe_facts == {}


class _Api:
    """What a hook may ask of the worker (worker/plugins.py), recorded instead of done."""

    def __init__(self):
        self.imports, self.sampled, self.submission_dir = [], [], "/x/"

    def on_import(self, module, patch):
        self.imports.append(module)

    def on_sample(self, pattern, name):
        self.sampled.append((pattern, name))

    def __getattr__(self, name):        # on_phase, on_torch, on_stage_end, emit: not what this test reads
        return lambda *a, **k: None


def test_a_hook_names_the_sampler_only_its_own_probes_mechanisms():
    import importlib
    hooked = [i for i in door.infos() if i.hook]
    seen = {}
    for i in hooked:
        api = _Api()
        importlib.import_module(i.hook).install(api)
        assert {name for _, name in api.sampled} <= set(i.mechanisms), (i.name, api.sampled)
        seen[i.name] = api
    build = seen["extension_build"]
    assert build.imports == ["torch.utils.cpp_extension"]
    assert [n for _, n in build.sampled] == ["lock_wait:build", "extension_build"]


def test_a_probes_mechanism_is_matched_before_the_built_in_ones(monkeypatch):
    from diagnose.runs.worker import sampler
    monkeypatch.setattr(sampler, "MECHANISMS", list(sampler.MECHANISMS))
    monkeypatch.setattr(sampler, "_OWN", [])
    sampler.own_mechanism("torch/utils/file_baton.py", "lock_wait:build")
    sampler.own_mechanism("torch/utils/cpp_extension.py", "extension_build")
    assert sampler.MECHANISMS[:2] == [("torch/utils/file_baton.py", "lock_wait:build"),
                                      ("torch/utils/cpp_extension.py", "extension_build")]
    assert sampler.MECHANISMS[-1] == ("threading.py", "lock_wait")       # the catch-all stays last


def test_the_helion_hook_says_each_search_and_the_probe_reads_it_back_cut_off_or_not(tmp_path):
    from probes.helion import hook as helion_hook
    from probes.helion.facts import step_searches
    sub = tmp_path / "submission.py"
    sub.write_text("def scale(x):\n    return x\n")
    code = compile(sub.read_text(), str(sub), "exec")
    ns: dict = {}
    exec(code, ns)

    class BoundKernel:
        kernel = types.SimpleNamespace(fn=ns["scale"])

        def autotune(self, args):
            return types.SimpleNamespace(config={"block_sizes": [16]})
    sent = []
    api = types.SimpleNamespace(submission=str(sub.resolve()), phase="first_call:n=8",
                                emit=lambda **f: sent.append({"t": 1000.0 + len(sent), **f}))
    assert helion_hook.patch(types.SimpleNamespace(BoundKernel=BoundKernel), api)
    BoundKernel().autotune([8])
    sent.append({"t": 1005.0, "event": "start", "kernel": "scale", "line": 1, "shape": "16", "case": "x"})
    assert [(e["event"], e["kernel"], e["line"], e["case"]) for e in sent[:2]] == [
        ("start", "scale", 1, "first_call:n=8"), ("tuned", "scale", 1, "first_call:n=8")]
    st = StageResult(name="test", status="ok", probe_facts={"helion": sent}, end_t=1009.0)
    done, cut = step_searches(st)
    assert (done["shape"], done["config"], done["done"]) == ("8", {"block_sizes": [16]}, True)
    assert (cut["shape"], cut["seconds"], cut["done"], cut["config"]) == ("16", 4.0, False, None)   # the end cut it
    assert door.ask("helion", "records", step=st) == [done, cut]
