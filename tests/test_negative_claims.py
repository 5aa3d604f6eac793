"""Negative claims are claims: what a report says is not there ("search: not present", "cannot pin: no place of the
module took a value the searches timed ... and no function of theirs returned it") or says cut work off or held it
("inside CUDA initialisation", "the last cut off by the deadline") is written from the runs' records, and
`report --audit` re-derives it from them: a session where it holds passes, one whose records show it false is
refused (analysis/audit/audit_negative.py). Each of the four was false in a case seen on a GPU."""
from __future__ import annotations

from diagnose.analysis.audit.audit import audit
from diagnose.analysis.causes import bisector
from diagnose.analysis.verdict import summary
from diagnose.session import Phase, Role, Run, StageResult
from diagnose.status import NOT_LOOKED, Status
from probes.helion import probe as helion
from probes.search.absent import absent_why
from probes.search.evidence import NO_RETURN, unpinned
from tests.builders import run, session

SITE = {"file": "/tmp/x/submission.py", "line": 7, "func": "custom_kernel"}
FIRST = "first_call:256x512x256"


def _rules(s) -> list[str]:
    return sorted({f.rule for f in audit(s)})


def _with_line(runs, name: str, state: str, why: str):
    s = session(runs)
    s.verdict = summary.verdict(s)
    s.probes = [{"name": name, "state": state, "why": why, "evidence": {}, "toggles": []}]
    return s


# -- search: not present ------------------------------------------------------------------------------------------

def _searched(waits=(), found=()):
    base = run("r0")
    base.stages[1].probe_facts["search"] = [{"what": "phase", "phase": FIRST, "case": "c", "ok": True,
                                             "searches": list(found), "changed": [], "returned": [],
                                             "waits": list(waits)}]
    return base


def not_present_false():
    base = _searched(found=[{"func": "_bench_all", "def_line": 20, "lines": [24], "line": 24, "path": [],
                             "candidates": 5, "clocks": ["time.perf_counter"], "seconds": 1.2}])
    # what the probe said when its hook took a loop that runs each candidate until a time passed for a wait
    return _with_line([base], "search", "not present", "no code of the submission read a clock between candidates "
                                                        "at a shape's first call, and no loop times candidates into a "
                                                        "module-level dict")


def test_not_present_names_what_the_first_calls_showed_and_is_refused_where_the_hook_saw_a_search():
    base = _searched(waits=[{"func": "spin", "line": 5, "calls": 40}])
    why = absent_why(base)
    assert why.startswith("no code of the submission read a clock between candidates in the baseline's 2 first "
                          "call(s) (spin() L5 read a clock again and again with nothing of the submission's between "
                          "(40 call(s)): a wait)"), why
    assert _rules(_with_line([base], "search", "not present", why)) == []
    assert absent_why(Run(id="r0", probe=None, stages=[StageResult(name="test", status=Status.CRASH)])).startswith(
        "the baseline reached no shape's first call")
    cut = run("r0", outcome="timeout", fail_at="test", site=SITE)
    cut.stage("test").killed = "deadline"        # a first call cut off 2 s in may not have reached its third candidate
    assert "in the baseline's 1 first call(s), the last cut off by the deadline 2.0 s in, and" in absent_why(cut)
    s = not_present_false()
    found = [f for f in audit(s) if f.rule == "not-present"]
    assert found and found[0].claim == "probe search" and "_bench_all() timed 5 candidates" in found[0].missing


# -- search: cannot pin -------------------------------------------------------------------------------------------

def _tuning(returned):
    t = Run(id="r1", probe=None, role=Role.TUNING, stages=[StageResult(name="tune", status=Status.OK)])
    t.stages[0].probe_facts["search"] = [
        {"what": "phase", "phase": f"tune:{k}", "case": k, "ok": True, "changed": [{"path": "_N", "kind": "attr",
                                                                                     "linked": False}],
         "searches": [{"func": "_pick", "candidates": 4, "seconds": 1.0}], "returned": returned}
        for k in ("64x64", "128x64")]
    return t


def cannot_pin_false():
    t = _tuning([{"func": "_pick", "def_line": 9, "key": None, "text": None, "linked": True,
                  "error": "it holds Tensor, which no constant in a source file can"}])
    return _with_line([run("r0"), t], "search", "cannot toggle", "the search ...; cannot pin no place of the module "
                                                                  "took a value the searches timed (what they chose "
                                                                  "is kept in a local, or in an object the module "
                                                                  "does not hold), and no function of theirs "
                                                                  "returned it")


def test_cannot_pin_says_what_the_functions_returned_and_is_refused_where_one_returned_the_choice():
    quiet = _tuning([{"func": "_pick", "def_line": 9, "key": "(64, 64)", "text": "3", "linked": False}])
    why = unpinned(quiet)
    assert why.endswith(f", and {NO_RETURN}"), why
    assert _rules(_with_line([run("r0"), quiet], "search", "cannot toggle", f"the search ...; cannot pin {why}")) == []
    s = cannot_pin_false()
    said = unpinned(s.run("r1"))
    assert "_pick() returned a value they timed at 2 of 2 shape(s), as it holds Tensor" in said, said
    found = [f for f in audit(s) if f.rule == "cannot-pin"]
    assert found and "_pick() returned a value the searches timed" in found[0].missing


# -- a hot spot inside CUDA initialisation ------------------------------------------------------------------------

def _hang(evaluator: bool):
    """A first call whose line 7 sat 16 s below torch/cuda/__init__.py, as an older sampler named all of that file's
    time CUDA's initialisation; the stage's device_init had initialised CUDA before it."""
    s = session([run("r0", outcome="timeout", fail_at="test", site=SITE)])
    if evaluator:        # a problem's own eval.py may start the submission's process itself: CUDA starts there
        s.task["evaluator"] = "eval.py"
    st = s.baseline.stage("test")
    st.killed, st.sample_interval_s = "deadline", 0.01
    st.phases = [Phase("torch_import", 0.0, 2.0), Phase("device_init", 2.0, 2.2),
                 Phase("submission_import", 2.2, 3.0), Phase(FIRST, 3.0, 19.0, open=True)]
    st.samples = {FIRST: {"lines": {"7": 1600}, "mechanisms": {"7|cuda_init": 1600}}}
    bisector.conclude(s)
    s.verdict = summary.verdict(s)
    return s


def cuda_init_false():
    s = _hang(evaluator=True)
    del s.task["evaluator"]      # the built-in model's worker: the submission runs where device_init ran
    return s


def test_inside_cuda_initialisation_is_said_only_before_cuda_was_up_and_refused_after():
    s = _hang(evaluator=True)
    (said,) = s.inconclusive
    assert said.probe == NOT_LOOKED and "inside CUDA initialisation (100% of that line's samples)" in said.reason
    assert _rules(s) == []
    refused = [f for f in audit(cuda_init_false()) if f.rule == "mechanism-seen"]
    assert refused and refused[0].claim == "the cause was not looked for"
    # concluded again from the same records, the built-in model's hang names what they show
    s = _hang(evaluator=False)
    assert "inside torch.cuda's own code, with CUDA already initialised" in s.inconclusive[0].reason
    assert "CUDA initialisation" not in s.inconclusive[0].reason and _rules(s) == []


def test_the_sampler_names_cuda_initialisation_only_inside_lazy_init(tmp_path):
    """torch/cuda/__init__.py holds CUDA's initialisation (_lazy_init) beside synchronize() and every other torch.cuda
    call: time below the file is CUDA's initialisation only inside _lazy_init; a synchronize() is a wait for the GPU."""
    import sys

    from diagnose.runs.worker.sampler import Sampler
    sub, lib = tmp_path / "submission.py", tmp_path / "torch" / "cuda" / "__init__.py"
    sampler = Sampler(ch=None, filename=str(sub), main_ident=0)
    ns = {"sys": sys, "take": lambda frame: sampler._sample(FIRST, frame)}
    exec(compile("".join(f"def {f}():\n    take(sys._getframe())\n" for f in ("_lazy_init", "synchronize",
                                                                            "current_device")), str(lib), "exec"), ns)
    exec(compile("def custom_kernel(f):\n    f()\n", str(sub), "exec"), ns)
    for f in ("_lazy_init", "synchronize", "current_device"):
        ns["custom_kernel"](ns[f])
    assert dict(sampler._agg[FIRST]["mechanisms"]) == {"2|cuda_init": 1, "2|cuda_sync": 1, "2|cuda_call": 1}


# -- Helion: the last search cut off by the deadline --------------------------------------------------------------

def _helion(status: str, error: str | None):
    base = run("r0", outcome=status, fail_at="test", site=SITE)
    st = base.stage("test")
    st.killed = "deadline" if status == "timeout" else None
    st.probe_facts["helion"] = [{"event": "tuned", "kernel": "window_sum", "line": 10, "shape": "(64, 64)",
                                 "case": FIRST, "seconds": 19.6 if error is None else 0.001, "error": error,
                                 "done": False}]
    return base


def cut_off_false():
    # the harness's rule made Helion raise at its first search: the stage crashed, nothing ran out of time
    return _with_line([_helion("crash", "AutotuningDisallowedInEnvironment: Autotuning is disabled")], "helion",
                      "run", "1 Helion search(es) in the baseline, 0.0 s, the last cut off by the deadline")


def test_the_last_search_is_cut_off_by_the_deadline_only_where_the_deadline_stopped_its_stage():
    s = _with_line([_helion("timeout", None)], "helion", "run", "")
    said = helion.mechanism(s, s.baseline)
    assert "1 shape(s)), 19.6 s together, the last cut off by the deadline." in said, said
    s.probes[0]["why"] = said
    assert _rules(s) == []
    s = cut_off_false()
    assert "the last ended in AutotuningDisallowedInEnvironment." in helion.mechanism(s, s.baseline)
    found = [f for f in audit(s) if f.rule == "cut-off"]
    assert found and found[0].claim == "probe helion" and "test ended crash" in found[0].missing


def broken() -> list[tuple[str, object]]:
    """(rule, session breaking only it), for test_audit's every-rule check."""
    return [("not-present", not_present_false()), ("cannot-pin", cannot_pin_false()),
            ("mechanism-seen", cuda_init_false()), ("cut-off", cut_off_false())]
