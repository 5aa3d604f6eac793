"""A fix made of several edits of one probe: each edit alone still fails but takes part of the time away, so the
engine tries them together as one more variant of that probe, as it combines suspects across probes. The case seen
on a GPU: Triton autotune with a float in its key, where dropping the float alone still tunes every config cold at
each shape, and pinning the winning configs alone still tunes at every call.

The engine's choice and the words are tested through the scripted runner (no process, no Triton); the e2e test runs
a stand-in Triton autotuner on the CPU (tests/fixtures/lib/autotune_float_key.py).
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from diagnose.engine import Engine
from diagnose.runs.runner.scripted import ScriptedRunner
from diagnose.runs.settings import Settings
from diagnose.session import Phase, Role, Session, StageResult
from diagnose.source.edits import changed_range
from diagnose.source.submission import Submission
from diagnose.tasks.loader import load_task
from tests.builders import stage
from tests.conftest import FIXTURES, cli

SOURCE = (FIXTURES / "lib" / "autotune_float_key.py").read_text()
STAGES = ("compile", "benchmark")
BUDGETS = {"compile": 60.0, "benchmark": 50.0}
PIN_N, PIN_ONE, KEY = ("autotune pinned to the 2 winning config(s)", "autotune pinned to one config per kernel",
                       "key without scale")
BOTH = f"together: {PIN_N} + {KEY}"
NAMES = ("torch_import", "submission_import", "warmup_benchmark", "first_call:64x256x512", "inputs:64x256x512",
         "check:64x256x512", "timing:64x256x512", "inputs:128x128x256", "first_call:128x128x256",
         "check:128x128x256", "timing:128x128x256")


def _tuned(key: int, tried: int, seconds: float, winner: int) -> dict:
    """One autotune record of the stand-in's kernel, as its hook says it (probes/autotune/hook.py)."""
    cfg = {"kwargs": {"BLOCK": winner}, "num_warps": 1, "num_stages": 2}
    k = f"256, 1.{key:04d}, torch.float8_e4m3fn, torch.float8_e4m3fn, torch.float32, torch.float32"
    return {"event": "tuned", "slot": f"_gemm|{k}", "kernel": "_gemm", "line": 81, "key": k, "tried": tried,
            "seconds": seconds, "best": {"config": cfg, "ms": 0.1}, "winner": cfg, "done": True, "configs": tried,
            "tuning_s": seconds, "calls": key + 1, "parts": ["256", f"1.{key:04d}", "torch.float8_e4m3fn"]}


def _benchmark(status: str, ended: int, records: list[dict]) -> StageResult:
    """The benchmark stage: `ended` phases ended, the next one open where it timed out."""
    st = stage("benchmark", status, wall=50.0 if status == "timeout" else 30.0, budget=50.0,
               phase=NAMES[ended] if status == "timeout" else None, probe_facts={"autotune": records})
    st.phases = [Phase(n, i, i + 1.0, open=status == "timeout" and i == ended) for i, n in
                 enumerate(NAMES[:ended + 1] if status == "timeout" else NAMES)]
    return st


def script(together_passes: bool):
    """The stand-in's story: every call tunes 36 configs (the first cold); the winners pinned tune 2 at every call;
    one config tunes nothing and times out later; the key without the float tunes 36 cold a shape."""
    def run(r):
        base = [_tuned(0, 36, 21.6, 256)] + [_tuned(i, 36, 0.9, (256, 64)[i % 2]) for i in range(1, 5)]
        if r.toggle == PIN_N:
            st = _benchmark("timeout", 9, [_tuned(i, 2, 0.05, 256) for i in range(40)])
        elif r.toggle == PIN_ONE:
            st = _benchmark("timeout", 8, [])
        elif r.toggle == KEY:
            st = _benchmark("timeout", 8, [_tuned(0, 36, 21.6, 256), _tuned(1, 36, 21.6, 64)])
        elif r.toggle == BOTH and together_passes:
            st = _benchmark("ok", len(NAMES), [_tuned(0, 2, 1.2, 256), _tuned(1, 2, 1.2, 64)])
        elif r.toggle == BOTH:
            st = _benchmark("timeout", 10, [_tuned(0, 2, 1.2, 256), _tuned(1, 2, 1.2, 64)])
        else:
            st = _benchmark("timeout", 5, base)
        return [stage("compile", wall=5.0, budget=60.0), st]
    return run


def _diagnose(together_passes: bool) -> tuple[Session, ScriptedRunner]:
    sub = Submission(path=Path("/home/user/sub.py"), source=SOURCE, tree=ast.parse(SOURCE))
    session = Session(submission={"path": "sub.py", "name": "sub.py", "source": SOURCE},
                      task={"name": "t", "shape_set": "small"},
                      harness={"name": "gpumode", "stages": list(STAGES), "budgets": BUDGETS})
    runner = ScriptedRunner(script(together_passes))
    settings = Settings(task=load_task(None, "fp8-dual-gemm", small=True), stages=STAGES, budgets=BUDGETS, jobs=2,
                        gpu=False, probes=("autotune",))
    eng = Engine(sub, session, settings, runner)
    eng.diagnose()
    assert eng.errors == []
    return session, runner


def test_two_edits_of_one_probe_that_each_take_part_of_the_time_away_are_tried_together_and_fix_it():
    s, runner = _diagnose(together_passes=True)
    probe = next(p for p in s.probes if p["name"] == "autotune")
    assert probe["toggles"] == [PIN_N, PIN_ONE, KEY], probe
    # one config and the winning configs touch the same text: alternatives, so only the first of them joins
    together = [r for r in s.runs if r.role == Role.SINGLE and r.toggle.startswith("together: ")]
    assert [r.toggle for r in together] == [BOTH], [r.toggle for r in s.runs]
    run = together[0]
    assert "configs=[triton.Config({'BLOCK': 256}" in run.variant and "+                 key=['n'])" in run.variant
    # it starts only once each edit alone has failed
    order = [j["toggle"] for j in runner.jobs if j["role"] == "single"]
    assert order.index(BOTH) > max(i for i, t in enumerate(order) if t in (PIN_N, PIN_ONE, KEY)), order
    assert s.fix is not None and s.fix.toggle == BOTH and s.fix.run == run.id
    top = s.causes[0]
    assert top.suspects == ["autotune"] and top.changes_outcome and f"{BOTH} fixes it" in top.narrative, top
    alone = {r.toggle: r.id for r in s.runs if r.role == Role.SINGLE}
    assert f"Each of its edits alone still failed ({PIN_N}: {alone[PIN_N]}, {KEY}: {alone[KEY]})" in top.narrative
    assert f"{PIN_N} ({alone[PIN_N]}): {alone[PIN_N]} ended 9 phases of benchmark before it stopped, r0 5; Triton " \
           f"autotuning took 0.05 s a record in {alone[PIN_N]} (40 records), 5.04 s in r0 (5 records)" in \
        top.narrative, top.narrative
    assert f"{KEY} ({alone[KEY]}): {alone[KEY]} ended 8 phases of benchmark before it stopped, r0 5" in \
        top.narrative, top.narrative


def test_where_the_edits_together_still_fail_the_cause_says_what_each_took_away_and_how_much():
    s, _ = _diagnose(together_passes=False)
    assert s.fix is None
    said = " ".join(c.narrative for c in s.causes) + " ".join(i.reason for i in s.inconclusive)
    ids = {r.toggle: r.id for r in s.runs if r.role == Role.SINGLE}
    assert f"{BOTH} ({ids[BOTH]}) ended timeout in benchmark, having taken part of it away ({ids[BOTH]} ended 10 " \
           f"phases of benchmark before it stopped, r0 5; Triton autotuning took 1.20 s a record in {ids[BOTH]} " \
           f"(2 records), 5.04 s in r0 (5 records))" in said, said
    assert f"{PIN_N} ({ids[PIN_N]}) ended timeout in benchmark, having taken part of it away ({ids[PIN_N]} ended 9 " \
           f"phases of benchmark before it stopped, r0 5; Triton autotuning took 0.05 s a record" in said, said


def test_edits_that_touch_the_same_text_are_alternatives_and_apart_ones_compose():
    pinned = SOURCE.replace('key=["n", "scale"]', "key=['n']")
    configs = SOURCE.replace("for w in (1, 2, 4, 8, 16, 32)]", "for w in (1,)]")
    a, b = changed_range(SOURCE, pinned), changed_range(SOURCE, configs)
    assert SOURCE[a[0]:a[1]] == '"n", "scale"' and b[1] <= a[0]
    assert changed_range("abc", "abc") == (3, 3) and changed_range("abcd", "abXd") == (2, 3)


@pytest.mark.e2e
def test_a_float_in_the_autotune_key_is_fixed_by_dropping_it_and_pinning_the_winners_together(tmp_path):
    """The stand-in Triton on the CPU: each of the two edits alone times out the 50 s benchmark (36 configs cold at
    each shape; two configs at every call), one config alone is wrong on the second shape, and both edits
    together pass: the fix, verified through the stage."""
    out = tmp_path / "o"
    res = cli("run", FIXTURES / "lib" / "autotune_float_key.py", "--stages", "benchmark", "--budget", "50",
              "--probes", "autotune", "--out", out)
    s = json.loads((out / "session.json").read_text())
    assert res.returncode == 1 and s["verdict"]["status"] == "timeout", res.stdout[-3000:]
    runs = {r["toggle"]: r for r in s["runs"] if r["role"] == "single"}
    pin = next(t for t in runs if t.startswith("autotune pinned to the ") and "winning" in t)
    assert runs[pin]["outcome"] == "timeout" and runs[KEY]["outcome"] == "timeout", {t: r["outcome"]
                                                                                     for t, r in runs.items()}
    both = f"together: {pin} + {KEY}"
    assert runs[both]["outcome"] == "ok" and s["fix"]["toggle"] == both, (list(runs), s["fix"])
    top = s["causes"][0]
    assert top["suspects"] == ["autotune"] and f"{both} fixes it" in top["narrative"], top["narrative"]
    assert "Each of its edits alone still failed" in top["narrative"], top["narrative"]
    audited = cli("report", out / "session.json", "--audit")
    assert audited.returncode == 0 and "are supported" in audited.stdout, audited.stdout


def _run(rid: str, stages: list, probe: str | None = None):
    from diagnose.session import Run
    return Run(id=rid, role=Role.SINGLE if probe else Role.BASELINE, probe=probe, toggle="t" if probe else None,
               source_sha=rid, stages=stages,
               outcome=next((s.status for s in stages if s.status in ("timeout", "at_risk")), stages[0].status))


GPU = [{"k": "env", "cuda_available": True}]      # a prediction is judged against its budget only on a GPU


def test_at_risk_past_its_budget_is_the_baselines_timeout_by_measure_not_a_fix():
    """(the GPU's g5) an edit whose benchmark sample predicts 128 s of a 60 s budget did not fix a timeout there."""
    from diagnose.analysis.verdict.comparison import compare
    from diagnose.status import Compared
    base = _run("r0", [stage("test", wall=30.0, budget=60.0), stage("benchmark", "timeout", wall=60.0, budget=60.0)])
    over = _run("r2", [stage("test", wall=6.0, budget=60.0), stage(
        "benchmark", "at_risk", wall=10.0, budget=60.0, predicted=128.0, events=GPU)], probe="autotune")
    early = _run("r3", [stage("test", "at_risk", wall=50.0, budget=60.0, predicted=90.0, events=GPU),
                        stage("benchmark", "skipped", wall=0.0, budget=60.0)], probe="autotune")
    s = Session(submission={"path": "s.py", "source": SOURCE}, task={"name": "t"}, runs=[base, over, early],
                harness={"name": "gpumode", "stages": ["test", "benchmark"],
                         "budgets": {"test": 60.0, "benchmark": 60.0}})
    assert compare(s, base, over) == Compared.SAME
    assert compare(s, base, early) == Compared.DIFFERENT
    s.runs[1].stages[1].predicted_s = 40.0          # predicted inside its budget: that is still the fix it was
    assert compare(s, base, over) == Compared.FIXED


def test_records_cut_off_by_the_same_deadline_are_judged_per_record_and_per_call_not_by_their_sum():
    """Both runs tuned until the deadline: their seconds are alike, but the pin times fewer configs a key and the key
    without the float tunes at fewer calls. Each took part of the work away: neither 'ran unchanged' nor gone."""
    from diagnose.analysis.effects.effect_calls import library_effect
    from probes import door
    records = door.of("autotune", "records")

    def bench(recs):
        return _run("x", [stage("benchmark", "timeout", wall=60.0, budget=60.0, probe_facts={"autotune": recs})])
    base = bench([_tuned(i, 36, 4.16, 256) for i in range(24)])
    pinned = bench([_tuned(i, 13, 2.44, 256) for i in range(35)])
    keyless = bench([dict(_tuned(i, 36, 7.1, 256), calls=200 + i) for i in range(12)])
    same = bench([_tuned(i, 36, 4.0, 256) for i in range(24)])
    e = library_effect(base, pinned, records, "Triton autotuning")
    assert (e.removed, e.partly, e.untaken) == (None, True, False) and "2.44 s a record" in e.what, e
    e = library_effect(base, keyless, records, "Triton autotuning")
    assert e.partly and "12 record(s) in 211 calls" in e.what and "24 in 24" in e.what, e
    e = library_effect(base, same, records, "Triton autotuning")
    assert e.untaken and "ran unchanged" in e.why_not(), e
