"""The engine through its runner seam: a scripted runner replays stage results, so the scheduling and
the evidence rules are asserted exactly (no process starts, no torch is imported)."""
import ast
import textwrap
import threading
from pathlib import Path

from diagnose.engine import Engine
from diagnose.engine.observer import Observer
from diagnose.engine.run_state import VARIANT_NICE
from diagnose.runs.runner.scripted import ScriptedRunner
from diagnose.runs.settings import Settings
from diagnose.session import Role, Session, StageResult
from diagnose.source.submission import Submission
from diagnose.status import Status
from diagnose.tasks.loader import load_task
from tests.builders import stage

STAGES = ["compile", "test", "benchmark", "leaderboard"]
BUDGETS = {"compile": 60.0, "test": 60.0, "benchmark": 60.0, "leaderboard": 60.0}
US = {"256x4096x7168": 43.0}

STORM = textwrap.dedent('''
    import torch

    @torch.compile(dynamic=False)
    def _epilogue(r1, r2):
        return (r1 * r2).half()

    def custom_kernel(data):
        return _epilogue(data[0], data[1])
''')

WARMUP_AT_IMPORT = textwrap.dedent('''
    import time
    import torch

    time.sleep(500)     # import work that times out the compile step

    @torch.compile
    def _f(x):
        return x + 1

    def custom_kernel(data):
        for _ in range(20):
            _f(data)
        return data
''')


def diagnose(source, script, jobs=1, stop=None, gpu=True, **opts):
    sub = Submission(path=Path("/home/user/sub.py"), source=source, tree=ast.parse(source))
    session = Session(submission={"path": "sub.py", "name": "sub.py", "source": source},
                      task={"name": "t", "shape_set": "full"},
                      harness={"name": "gpumode", "stages": STAGES, "budgets": BUDGETS})
    runner = ScriptedRunner(script)
    if "probes" in opts:
        opts["probes"] = tuple(opts["probes"])
    settings = Settings(task=load_task(None, "fp8-dual-gemm", small=True), stages=tuple(STAGES), budgets=BUDGETS,
                        jobs=jobs, gpu=gpu, **opts)
    eng = Engine(sub, session, settings, runner, stop=stop)
    eng.diagnose()
    assert eng.errors == []
    return session, runner


def ok(name, wall=10.0, budget=None, **kw):
    return stage(name, wall=wall, budget=budget or BUDGETS[name], per_call_us=US, **kw)


def storm_script(run):
    """A compiled epilogue that recompiles on every call: the benchmark times out at its 60 s budget.
    Compiling it off fixes it, and so does dynamic=True; the mode does not matter. The fixing variants
    spent long stretches queued for the GPU lock, which must not count against their budgets."""
    records = [{"compile_id": "0/0", "phase": "first_call:a"},
               {"compile_id": "0/1", "phase": "first_call:b", "recompile_reason": "size mismatch at index 0"}]
    fail = [ok("compile"), ok("test", compile=records),
            stage("benchmark", "timeout", wall=60.0, budget=60.0, phase="check:256x4096x7168", compile=records),
            StageResult("leaderboard", Status.SKIPPED)]
    if run.toggle == "compile off":
        return [ok("compile", wall=60.0, lock_wait=50.0), ok("test"), ok("benchmark"), ok("leaderboard")]
    if run.toggle == "dynamic=True":
        return [ok("compile"), ok("test"), ok("benchmark", wall=13.0),
                ok("leaderboard", wall=60.0, lock_wait=47.0)]
    return fail


def test_lock_waits_are_not_charged_and_the_specific_mechanism_ranks_first():
    s, runner = diagnose(STORM, storm_script)
    assert s.verdict.status == Status.TIMEOUT and s.verdict.stage == "benchmark" and s.verdict.confirmed
    top = s.causes[0]
    assert top.suspects == ["recompile"] and top.changes_outcome and top.confidence == "high"
    assert "dynamic=True fixes it" in top.narrative and "size mismatch" in top.narrative
    assert "compile_mode: compile off" in top.alternatives
    assert "compile_mode" not in [c.probe for c in s.cleared]      # compile off fixes it
    fixing = {c.toggle for c in s.fix.costs}
    assert fixing == {"compile off", "dynamic=True"}
    # no fixing run was charged for the time it waited for the GPU, so none needed a solo rerun
    assert not [r for r in s.runs if r.role == Role.CONFIRM]
    lb = next(r for r in s.runs if r.toggle == "dynamic=True").stage("leaderboard")
    assert lb.wall_s == 60.0 and lb.charged_s == 13.0 and lb.lock_wait_s == 47.0


def test_an_unexercised_toggle_is_inconclusive():
    """The import times out before custom_kernel's warmup loop could run: warmup is untested."""
    def script(run):
        return [stage("compile", "timeout", wall=60.0, budget=60.0, phase="submission_import", reached=[])]
    s, runner = diagnose(WARMUP_AT_IMPORT, script, probes=["warmup"])
    assert s.verdict.status == Status.TIMEOUT
    assert [c.probe for c in s.cleared] == []
    assert s.inconclusive and s.inconclusive[0].probe == "warmup"
    assert "never executed" in s.inconclusive[0].reason
    watch = next(j["watch"] for j in runner.jobs if j["toggle"] == "warmup N->1")
    assert watch == [12]   # the edited loop header, in the variant's numbering


def _loaded_timeout(run, solo_outcome):
    """Under load the test stage times out, having lost 3 s to other runs; alone it ends `solo_outcome`."""
    if run.role == Role.CONFIRM:
        if solo_outcome == "ok":
            return [ok("compile"), ok("test", wall=5.0, budget=6.0)]
        return [ok("compile"), stage("test", "timeout", wall=6.0, budget=6.0, phase="first_call:a")]
    return [ok("compile"), stage("test", "timeout", wall=6.0, budget=6.0, delay=3.0, overlapped=["r1"],
                                 phase="first_call:a"), StageResult("benchmark", Status.SKIPPED),
            StageResult("leaderboard", Status.SKIPPED)]


def test_a_timeout_under_load_is_confirmed_by_a_solo_rerun():
    s, runner = diagnose(STORM, lambda r: _loaded_timeout(r, "timeout"), jobs=3, probes=[])
    confirm = [j for j in runner.jobs if j["role"] == "confirm"]
    assert confirm and all(j["solo"] and j["beside"] == [] for j in confirm)
    assert [j["stages"][0] for j in confirm] == ["compile", "test"]     # up to the doubtful stage
    assert s.verdict.status == Status.TIMEOUT and s.verdict.confirmed
    assert "confirmed by a solo rerun" in s.verdict.note


def test_the_host_busy_warning_is_given_once_with_the_latest_measure():
    """Concluded before and after the solo rerun: one warning, measured over every run."""
    def script(run):
        if run.role == Role.CONFIRM:
            return [ok("compile"), stage("test", "timeout", wall=6.0, budget=6.0, phase="first_call:a")]
        return [ok("compile", delay=4.0), stage("test", "timeout", wall=6.0, budget=6.0, delay=3.0,
                                                overlapped=["r1"], phase="first_call:a")]
    s, _ = diagnose(STORM, script, jobs=3, probes=[])
    busy = [w for w in s.warnings if w["kind"] == "host_busy"]
    assert len(busy) == 1 and "over 32 s of runs" in busy[0]["message"], s.warnings


def test_a_timeout_that_passes_alone_is_not_reported_as_a_timeout():
    s, runner = diagnose(STORM, lambda r: _loaded_timeout(r, "ok"), jobs=3, probes=[])
    assert s.verdict.status == Status.OK and not s.verdict.confirmed
    assert "flaky" in s.verdict.note and s.causes == []
    assert any(w["kind"] == "flaky" for w in s.warnings)
    # the pass is the solo rerun's: the verdict names it, and its figures are that run's finished stages
    from diagnose.analysis.audit.audit import audit
    from diagnose.analysis.audit.claims import derive, one
    alone = next(r for r in s.runs if r.role == Role.CONFIRM)
    assert s.verdict.runs == [s.baseline.id, alone.id] and audit(s) == [], [str(f) for f in audit(s)]
    said = one(derive(s), "verdict").text
    assert "timeout" not in said and "passed its checks" in said


def test_a_doubtful_failure_is_rerun_through_the_stages_it_cut_off():
    """Alone, a run that timed out in test must also run benchmark and leaderboard: a pass of the first
    two stages is not a pass of the run."""
    s, runner = diagnose(STORM, lambda r: _loaded_timeout(r, "ok"), jobs=3, probes=[])
    confirm = [j for j in runner.jobs if j["role"] == "confirm"]
    assert [j["stages"][0] for j in confirm] == STAGES
    assert s.verdict.status == Status.OK


def test_a_flaky_failure_whose_rerun_stopped_early_is_inconclusive():
    """The solo rerun passed the stage that failed under load, then stopped before the later stages:
    the verdict cannot be ok, and says which stages never ran."""
    from diagnose.analysis.verdict import summary
    s, _ = diagnose(STORM, lambda r: _loaded_timeout(r, "ok"), jobs=3, probes=[])
    confirm = next(r for r in s.runs if r.role == Role.CONFIRM)
    confirm.stages = confirm.stages[:2]
    v = summary.verdict(s)
    assert v.status == Status.INCOMPLETE and not v.confirmed
    assert v.message.startswith("inconclusive") and "benchmark, leaderboard" in v.message


def test_a_solo_rerun_that_fails_in_another_stage_moves_the_verdict_there():
    """Under load the compile step timed out (a slow import); alone it passed and the test stage hung at a
    line. The verdict is the solo rerun's: test, with its line, and it says the first run differed."""
    def script(run):
        if run.role == Role.CONFIRM:
            return [ok("compile"), stage("test", "timeout", wall=60.0, phase="first_call:a",
                                         site={"file": "/home/user/sub.py", "line": 10, "func": "custom_kernel"})]
        return [stage("compile", "timeout", wall=60.0, delay=20.0, overlapped=["r1"], phase="submission_import"),
                StageResult("test", Status.SKIPPED), StageResult("benchmark", Status.SKIPPED),
                StageResult("leaderboard", Status.SKIPPED)]
    s, _ = diagnose(STORM, script, jobs=3, probes=[])
    v = s.verdict
    assert (v.status, v.stage, v.site["line"]) == (Status.TIMEOUT, "test", 10) and not v.confirmed
    assert "timeout in compile" in v.note and "timeout in test" in v.note and len(v.runs) == 2
    # no probe ran: no cause is stated, and the failure is placed where the solo rerun hung
    said = next(i for i in s.inconclusive if i.probe == "not looked for")
    assert not s.causes and said.site["line"] == 10 and "sub.py line 10" in said.reason, said


def test_without_confirmation_a_doubtful_timeout_says_unconfirmed():
    s, runner = diagnose(STORM, lambda r: _loaded_timeout(r, "timeout"), jobs=3, probes=[], confirm=False)
    assert s.verdict.status == Status.TIMEOUT and not s.verdict.confirmed
    assert s.verdict.note.startswith("unconfirmed")


def test_the_verdict_comes_first_then_fix_verification():
    """One job at a time: every verdict-deciding stage (baseline, singles up to the failing stage) runs
    before any stage that only verifies or times a fix."""
    s, runner = diagnose(STORM, storm_script, jobs=1)
    # the warm container informs the report and never decides a cause: it runs with the fix costing
    order = [(j["role"], j["stages"][0]) for j in runner.jobs if j["toggle"] != "warm container"]
    # the baseline fails in benchmark: up to there a stage decides the verdict; the leaderboard only
    # verifies a fix
    later = [i for i, (role, st) in enumerate(order) if role == "single" and st == "leaderboard"]
    deciding = [i for i, (role, st) in enumerate(order) if role == "single" and st != "leaderboard"]
    assert later and deciding and max(deciding) < min(later), order
    assert order[:4] == [("baseline", "compile"), ("baseline", "test"), ("baseline", "benchmark"),
                         ("single", "compile")]


def test_an_interrupt_gives_interrupted_and_ranks_nothing_from_runs_that_did_not_run():
    stop = threading.Event()

    def script(run):
        if run.role == Role.BASELINE:
            stop.set()      # the user presses Ctrl-C while the baseline runs
        return storm_script(run)
    s, runner = diagnose(STORM, script, stop=stop)
    assert s.verdict.status == Status.INTERRUPTED and not s.complete
    assert s.causes == [] and s.cleared == [] and s.fix is None
    assert all(j["role"] == "baseline" for j in runner.jobs)


def test_identical_variants_are_measured_once():
    src = STORM.replace("dynamic=False", 'mode="max-autotune"')
    s, runner = diagnose(src, lambda r: [ok(n) for n in STAGES], probes=["compile_mode"])
    same = [r for r in s.runs if r.toggle in ("same mode, no CUDA graphs", "mode=max-autotune-no-cudagraphs")]
    assert len(same) == 2 and sum("identical variant" in r.note for r in same) == 1
    assert len([j for j in runner.jobs if j["toggle"] in {r.toggle for r in same}]) == len(STAGES)


def test_when_the_baseline_cannot_be_judged_here_no_variant_runs():
    """The baseline needs a GPU this machine lacks: every variant would stop at the same place, so none
    is started; each says why it did not run."""
    from diagnose.engine.runs import MOOT

    def script(run):
        return [stage("compile", "needs_gpu", wall=2.0, phase="submission_import")]
    s, runner = diagnose(WARMUP_AT_IMPORT, script, jobs=1, probes=["warmup", "compile_mode"])
    assert [j["role"] for j in runner.jobs] == ["baseline"]
    others = [r for r in s.runs if r.role != Role.BASELINE]
    assert others and all(r.outcome == Status.SKIPPED and MOOT in r.note for r in others
                          if not r.note.startswith("identical"))
    assert s.verdict.status == Status.NEEDS_GPU and s.causes == [] and s.cleared == []


def test_an_identical_variant_decides_with_its_prior_not_after_its_last_stage(monkeypatch):
    """A toggle measured once as another's identical variant must not hold the combinations back until
    that run's fix-costing stages have ended: it decides when its prior passes the failing stage. The
    engine's own thread is slowed where it submits the combinations, as a loaded machine slows it: the
    order must not depend on it (a CI machine once ran every leaderboard stage first)."""
    from diagnose.engine.planning import Planner
    slow = Planner.fails_with

    def fails_with(self, *a, **kw):
        import time
        time.sleep(0.3)
        return slow(self, *a, **kw)
    monkeypatch.setattr(Planner, "fails_with", fails_with)
    src = STORM.replace("dynamic=False", 'mode="max-autotune", dynamic=False')

    def script(run):
        # one variant under two labels (the removing toggle is launched first): the script answers alike
        fixing = ("compile off", "mode=max-autotune-no-cudagraphs", "same mode, no CUDA graphs", "dynamic=True")
        if run.toggle in fixing or run.role == Role.COMBINATION:
            return [ok(n) for n in STAGES]
        records = [{"compile_id": "0/0", "phase": "first_call:a"},
                   {"compile_id": "0/1", "phase": "first_call:b", "recompile_reason": "size mismatch at index 0"}]
        return [ok("compile"), stage("test", "timeout", wall=60.0, budget=60.0, phase="first_call:a", compile=records),
                StageResult("benchmark", Status.SKIPPED), StageResult("leaderboard", Status.SKIPPED)]
    s, runner = diagnose(src, script, jobs=1, probes=["compile_mode", "recompile"])
    assert any("identical variant" in r.note for r in s.runs)
    order = [(j["role"], j["toggle"], j["stages"][0]) for j in runner.jobs]
    first_combo = next(i for i, (role, _, _) in enumerate(order) if role == "combination")
    # one variant under two labels is measured once, under the first (the probe's order); the combinations do not
    # wait for the fix costing to end (the leaderboards run only where the choice of fix reaches them:
    # engine/fix_order.py, so the last costing stage may be any variant's)
    last_costing = max(i for i, (role, _, st) in enumerate(order)
                       if role == "single" and st in ("benchmark", "leaderboard"))
    assert first_combo < last_costing, order


def _fixes_script(us: dict, lb_fails: tuple = ()):
    """STORM's recompiles time the test stage out; the toggles in `us` pass every stage at that steady state (µs
    per call), except the leaderboard of those in `lb_fails`, which times out."""
    records = [{"compile_id": "0/0", "phase": "first_call:a"},
               {"compile_id": "0/1", "phase": "first_call:b", "recompile_reason": "size mismatch at index 0"}]

    def script(run):
        if run.toggle in us and run.role == Role.SINGLE:
            per = {"256x4096x7168": us[run.toggle]}
            lb = stage("leaderboard", "timeout", wall=60.0, budget=60.0, phase="check:256x4096x7168") \
                if run.toggle in lb_fails else ok("leaderboard")
            return [ok("compile"), ok("test"), stage("benchmark", wall=10.0, budget=60.0, per_call_us=per), lb]
        return [ok("compile"), stage("test", "timeout", wall=60.0, budget=60.0, phase="first_call:a", compile=records),
                StageResult("benchmark", Status.SKIPPED), StageResult("leaderboard", Status.SKIPPED)]
    return script


def test_only_the_variant_the_choice_reaches_runs_the_stages_after_its_steady_state():
    """Three toggles each fix the timeout. Each runs its benchmark (its steady state is its cost, and the fix is
    chosen by it); the leaderboard, which only shows that the chosen one fits its budget, runs for the leading one
    first, at a priority of its own, and not at all for an alternative the choice never reaches: that one's cost
    is still given, with the stage it did not run, and the audit re-derives that it could not change the choice."""
    from diagnose.analysis.audit.audit import audit
    from diagnose.analysis.causes.fix_choice import NOT_NEEDED
    us = {"compile off": 50.0, "dynamic=True": 40.0, "mode=max-autotune-no-cudagraphs": 45.0}
    src = STORM.replace("dynamic=False", 'mode="max-autotune", dynamic=False')
    s, runner = diagnose(src, _fixes_script(us), jobs=1, probes=["compile_mode", "recompile"])
    assert s.fix.toggle == "dynamic=True" and s.fix.steady_us == 40.0
    lbs = [j["toggle"] for j in runner.jobs if j["stages"] == ["leaderboard"]]
    assert "compile off" not in lbs and "dynamic=True" in lbs, lbs
    # a leading fix's stage asks for its timing sections first (runner/arbiter.py); an alternative's never does
    assert {j["toggle"] for j in runner.jobs if j["lead"]} <= {"dynamic=True", "mode=max-autotune-no-cudagraphs"}
    assert next(j for j in runner.jobs if j["toggle"] == "dynamic=True" and j["stages"] == ["leaderboard"])["lead"]
    off = next(r for r in s.runs if r.toggle == "compile off")
    assert off.stage("leaderboard").status == Status.SKIPPED and off.stage("leaderboard").message == NOT_NEEDED
    costs = {c.toggle: c for c in s.fix.costs}
    assert costs["compile off"].not_run == ["leaderboard"] and costs["compile off"].steady_us == 50.0
    assert costs["dynamic=True"].not_run == [] and s.complete
    assert audit(s) == []
    # its outcome covers only the stages it ran: the report says so beside it, and beside its cost
    from diagnose.output import markdown
    assert off.note == "leaderboard " + NOT_NEEDED
    report = markdown.render(s)
    assert f"compile off ({off.note})" in report and "(leaderboard not run: the fix was chosen first)" in report


def test_where_the_leading_fix_fails_a_later_stage_the_next_one_runs_it():
    """The fastest fix times out in its leaderboard: the choice moves to the next, whose parked leaderboard then
    runs, and that one is the fix."""
    us = {"compile off": 50.0, "dynamic=True": 40.0, "mode=max-autotune-no-cudagraphs": 45.0}
    src = STORM.replace("dynamic=False", 'mode="max-autotune", dynamic=False')
    s, runner = diagnose(src, _fixes_script(us, lb_fails=("dynamic=True",)), jobs=1,
                         probes=["compile_mode", "recompile"])
    assert s.fix.toggle == "mode=max-autotune-no-cudagraphs", s.fix
    lbs = [j["toggle"] for j in runner.jobs if j["stages"] == ["leaderboard"]]
    assert lbs.index("dynamic=True") < lbs.index("mode=max-autotune-no-cudagraphs") and "compile off" not in lbs
    # parked while dynamic=True led, its leaderboard is the leader's once released: first for the GPU, no CPU yielded
    moved = next(j for j in runner.jobs if j["toggle"] == "mode=max-autotune-no-cudagraphs"
                 and j["stages"] == ["leaderboard"])
    assert moved["lead"] and moved["nice"] == 0, moved


# What a crashing Round 9 run records of the suspects its toggles take away (analysis/effects/effects.py measures them):
# the compile call's settings, and the outer capture it crashed in.
ROUND9_RECORDS = {"compile_calls": [{"caller_file": "/c/r0/work/submission.py", "caller_line": 15, "via": "decorator",
                                     "target": "_fused_silu_mul",
                                     "kwargs": {"mode": "max-autotune", "fullgraph": True}}],
                  "probe_facts": {"graph_capture": [{"event": "capture", "origin": "outer", "phase": "first_call:a",
                                                     "start_s": 19.0, "end_s": None}]}}


def test_the_combinations_start_beside_a_slow_toggle_not_after_it():
    """Round 9's shape: capture and max-autotune fail together. A warmup toggle still running must not hold
    back the combination with every suspect out (it needs no toggle's answer), nor the one that keeps the
    two suspects already seen to fix it alone."""
    import time
    src = (Path(__file__).resolve().parent.parent / "examples" / "round9.py").read_text()
    fixes = {"capture off", "capture kept, compiled fn uncompiled inside", "compile off", "mode=default",
             "mode=max-autotune-no-cudagraphs"}
    crash = [ok("compile"), stage("test", "crash", wall=20.0, phase="first_call:a",
                                  message="RuntimeError: Cannot prepare for replay during capturing stage",
                                  **ROUND9_RECORDS),
             StageResult("benchmark", Status.SKIPPED), StageResult("leaderboard", Status.SKIPPED)]

    def script(run):
        if run.toggle == "warmup N->1":
            time.sleep(1.5)
        passes = run.toggle in fixes or (run.role == Role.COMBINATION and run.toggle == "all suspects removed")
        return [ok(n) for n in STAGES] if passes else crash
    s, runner = diagnose(src, script, jobs=8, gpu=True)
    slow = next(r.id for r in s.runs if r.toggle == "warmup N->1")
    combos = [j for j in runner.jobs if j["role"] == "combination"]
    assert {j["toggle"] for j in combos} >= {"all suspects removed", "keep graph_capture + compile_mode"}, combos
    assert all(slow in j["beside"] for j in combos), [(j["toggle"], j["beside"]) for j in combos]
    assert s.causes[0].suspects == ["graph_capture", "compile_mode"], s.causes[0]


def test_round9s_first_wave_has_every_remover_and_both_likely_combinations_beside_the_baseline():
    """What the source already says starts with the baseline: the import-time work (L56 builds the file's own
    class) and the recompiles (a compile site that is not dynamic, cases in several shapes) are toggled in the
    first wave, and so are the combination with every suspect out and the one the source says is likely (a
    capture around a max-autotune function). Each of them runs while the baseline still does; the warm
    container, which decides no cause, waits for it. Verdict and causes stay the same."""
    import time
    src = (Path(__file__).resolve().parent.parent / "examples" / "round9.py").read_text()
    fixes = {"capture off", "capture kept, compiled fn uncompiled inside", "compile off", "mode=default",
             "mode=max-autotune-no-cudagraphs", "same mode, no CUDA graphs"}
    # as the H100 showed it: a recompile at the first call, and 3.6 s of the import spent at L56
    crash = [ok("compile"), stage("test", "crash", wall=20.0, phase="first_call:a",
                                  message="RuntimeError: Cannot prepare for replay during capturing stage",
                                  compile=[{"compile_id": "0/0", "phase": "submission_import"},
                                           {"compile_id": "0/1", "phase": "first_call:a",
                                            "recompile_reason": "tensor 'r1' size mismatch at index 0"}],
                                  samples={"submission_import": {"module": {"56": 360}}}, sample_interval_s=0.01,
                                  **ROUND9_RECORDS),
             StageResult("benchmark", Status.SKIPPED), StageResult("leaderboard", Status.SKIPPED)]

    def script(run):
        if run.role == Role.BASELINE:
            time.sleep(1.5)       # long enough that the first wave is under way while it runs
        passes = run.toggle in fixes or (run.role == Role.COMBINATION and run.toggle == "all suspects removed")
        return [ok(n) for n in STAGES] if passes else crash
    s, runner = diagnose(src, script, jobs=16, gpu=True)
    base = next(r.id for r in s.runs if r.role == Role.BASELINE)
    first = {j["toggle"]: j for j in runner.jobs if base in j["beside"]}
    assert {"dynamic=True", "defer import work", "all suspects removed",
            "keep graph_capture + compile_mode"} <= set(first), sorted(first)
    assert "warm container" not in first
    assert s.verdict.status == Status.CRASH and s.causes[0].suspects == ["graph_capture", "compile_mode"]
    assert len([r for r in s.runs if r.role == Role.COMBINATION]) == 2     # the search asked for nothing else
    # the variants yield the CPU to the baseline
    assert {j["nice"] for j in runner.jobs if j["role"] == "baseline"} == {0}
    variants = [j for j in runner.jobs if j["role"] in ("single", "combination")]
    assert {j["nice"] for j in variants if not j["lead"]} == {VARIANT_NICE}
    # but the leading fix's stages past the failure, which the full report waits for, do not yield it
    assert {j["nice"] for j in runner.jobs if j["lead"]} == {0}
    # and on a GPU they start once the baseline has its CUDA context, which its job says
    assert {j["sets_device"] for j in runner.jobs if j["role"] == "baseline"} == {True}
    assert {j["held_for_device"] for j in runner.jobs if j["role"] in ("single", "combination")} == {True}
    assert not [j for j in runner.jobs if j["role"] not in ("single", "combination") and j["held_for_device"]]
    # started before the baseline failed in test, a combination still runs nothing past it
    assert not [j for j in runner.jobs if j["role"] == "combination" and j["stages"][0] in ("benchmark", "leaderboard")]


def _order_test(baseline_fails_in):
    """The baseline is slow in `baseline_fails_in` and fails there; compile off passes every stage at once.
    Returns, for compile off's benchmark job, whether the baseline was running beside it."""
    import time

    def script(run):
        if run.role == Role.BASELINE:
            time.sleep(1.0)
            out = [ok("compile")]
            for n in STAGES[1:]:
                out.append(stage(n, "crash", wall=5.0, message="RuntimeError: boom") if n == baseline_fails_in
                           else ok(n))
                if n == baseline_fails_in:
                    return out + [StageResult(m, Status.SKIPPED) for m in STAGES[STAGES.index(n) + 1:]]
            return out
        return [ok(n) for n in STAGES]
    s, runner = diagnose(STORM, script, jobs=8, probes=["compile_mode"])
    base = next(j["run"] for j in runner.jobs if j["role"] == "baseline")
    bench = next(j for j in runner.jobs if j["toggle"] == "compile off" and j["stages"] == ["benchmark"])
    return base in bench["beside"]


def test_on_a_cpu_no_variant_waits_for_the_baselines_device():
    """The head start is for a GPU's contexts: on a CPU no variant's job is held for the baseline's device. The
    baseline's job still says when it has it: that is the engine's start check, on any machine."""
    src = (Path(__file__).resolve().parent.parent / "examples" / "round9.py").read_text()
    s, runner = diagnose(src, lambda run: [ok(n) for n in STAGES], jobs=4, gpu=False)
    assert len({j["role"] for j in runner.jobs}) >= 2, runner.jobs
    assert not [j for j in runner.jobs if j["held_for_device"]]
    assert {j["sets_device"] for j in runner.jobs if j["role"] == "baseline"} == {True}


def _start_script(first: StageResult):
    def script(run):
        if run.role == Role.BASELINE:
            return [first] + [StageResult(n, Status.SKIPPED) for n in STAGES[1:]] if first.status != Status.OK \
                else [ok(n) for n in STAGES]
        return [ok(n) for n in STAGES]
    return script


def test_the_baselines_first_process_is_the_start_check_and_nothing_else_starts_before_it():
    """A runner that starts processes: until the baseline's first process has its device, nothing else is
    launched. One that ended before it (torch's import failed) is this machine's fault or ours: CannotStart, the
    only job the baseline's, the session never saved. One that got there lets every other run go."""
    import pytest

    from diagnose.errors import CannotStart
    from diagnose.session import Phase
    src = (Path(__file__).resolve().parent.parent / "examples" / "round9.py").read_text()
    failed = StageResult(name="compile", status=Status.CRASH, phase="torch_import", exit_code=3,
                         phases=[Phase("torch_import", 0.0, 0.2, open=True, ok=False)],
                         events=[{"k": "worker_error", "type": "OSError", "message": "libcudart.so.12: missing"}])
    for first, fails in ((failed, True), (ok("compile"), False)):
        sub = Submission(path=Path("/home/user/sub.py"), source=src, tree=ast.parse(src))
        session = Session(submission={"path": "sub.py", "name": "sub.py", "source": src}, task={"name": "t"},
                          harness={"name": "gpumode", "stages": STAGES, "budgets": BUDGETS})
        runner = ScriptedRunner(_start_script(first))
        runner.starts_processes = True
        saved = []

        class Heard(Observer):
            def __init__(self, heard):
                self.heard = heard

            def on_change(self, session, data, claims):
                self.heard.append(len(data["runs"]))

            def on_stage(self, run):
                self.heard.append(run.id)
        settings = Settings(task=load_task(None, "fp8-dual-gemm", small=True), stages=tuple(STAGES),
                            budgets=BUDGETS, jobs=4, gpu=False)
        eng = Engine(sub, session, settings, runner, observer=Heard(saved))
        if fails:
            with pytest.raises(CannotStart, match="torch_import: OSError: libcudart.so.12"):
                eng.diagnose()
            assert [j["role"] for j in runner.jobs] == ["baseline"] and saved == [], (runner.jobs, saved)
        else:
            eng.diagnose()
            assert len({j["run"] for j in runner.jobs}) > 1 and saved and session.verdict.status == Status.OK
            first_other = next(i for i, j in enumerate(runner.jobs) if j["role"] != "baseline")
            assert runner.jobs[0]["role"] == "baseline" and first_other >= 1


def test_a_baseline_whose_jail_fails_is_cannot_start_and_no_other_run_starts():
    """The runner itself fails on the baseline's first job (its jail: runner/stages.jail_failed raises): ours, never
    the submission's. CannotStart names it; no other job was ever handed to the runner."""
    import pytest

    from diagnose.errors import CannotStart
    src = (Path(__file__).resolve().parent.parent / "examples" / "round9.py").read_text()

    class JailFails(ScriptedRunner):
        def execute(self, job, on_stage, stop):
            if job.run.role == Role.BASELINE:
                self.jobs.append({"run": job.run.id, "role": "baseline"})
                try:
                    raise RuntimeError("the run's jail failed (OSError: no user namespace): the step's processes "
                                       "ended with it")
                finally:
                    job.device_up.ended()
            return super().execute(job, on_stage, stop)
    runner = JailFails(lambda run: [ok(n) for n in STAGES])
    runner.starts_processes = True
    sub = Submission(path=Path("/home/user/sub.py"), source=src, tree=ast.parse(src))
    session = Session(submission={"path": "sub.py", "name": "sub.py", "source": src}, task={"name": "t"},
                      harness={"name": "gpumode", "stages": STAGES, "budgets": BUDGETS})
    settings = Settings(task=load_task(None, "fp8-dual-gemm", small=True), stages=tuple(STAGES), budgets=BUDGETS,
                        jobs=4, gpu=True)
    eng = Engine(sub, session, settings, runner)
    with pytest.raises(CannotStart, match="the run's jail failed"):
        eng.diagnose()
    assert [j["role"] for j in runner.jobs] == ["baseline"], runner.jobs
    assert len(eng.errors) == 1 and "RuntimeError" in eng.errors[0]


def test_fix_costing_waits_for_the_baseline_and_deciding_stages_do_not():
    """Baseline fails in test: compile off's benchmark only costs a fix, so it waits until the baseline has
    ended. Baseline fails in benchmark: compile off's benchmark decides, and runs beside it."""
    assert _order_test("test") is False
    assert _order_test("benchmark") is True
