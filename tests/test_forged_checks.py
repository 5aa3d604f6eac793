"""A verdict the submission cannot write, end to end through `diagnose check` (CPU): a kernel that returns zeros behind
each way of making the check in its own process pass is never ok, beside a healthy file that still is. The built-in
FP8 dual GEMM (its small CPU form) and the `doubling` folder, judged by its own eval.py in a spawned pool worker.

(a) the worker's own check function replaced in sys.modules; (b) the reference's check_implementation.__code__
swapped (the same object: the identity guard passes); (c) the tool's event channel found with gc, every phase closed
as passed, a 'stage done' written and os._exit(0); (d) torch.isclose / allclose / testing.assert_close patched;
(e) the evaluator's own utils.match_reference replaced. Each one passed before the verifier: `check` said
PASSED ON CPU. `doubling_cloned`'s evaluator checks clones of its inputs and seeds a benchmark's 50 its own way
(seed + 42 before the first), as GPU MODE's eval_better_bench.py does: its outputs are still found and judged."""
import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from diagnose.triage.rows import row_of
from tests.conftest import FIXTURES, cli

pytestmark = pytest.mark.e2e     # every test here starts real processes

F = FIXTURES / "forged"
DOUBLING = ["--problem", FIXTURES / "problems" / "doubling"]
CLONED = ["--problem", FIXTURES / "problems" / "doubling_cloned"]     # checks clones, seeds a benchmark its own way
PASSED = "the evaluator in the submission's process passed it"
# name, file, problem, status, stage, what the verdict's message says
CASES = [
    ("healthy", FIXTURES / "healthy.py", [], "ok", None, "every stage passed"),
    ("a", F / "check_replaced.py", [], "wrong", "test", f"{PASSED}; the outputs are wrong"),
    ("b", F / "code_swapped.py", [], "wrong", "test", f"{PASSED}; the outputs are wrong"),
    ("c", F / "channel_closed.py", [], "tampered", "test", "never left that process"),
    ("d", F / "isclose_patched.py", [], "wrong", "test", f"{PASSED}; the outputs are wrong"),
    ("late", F / "late_zeros.py", [], "wrong", "benchmark", "check failed on 64x256x512 (output 49)"),
    ("healthy_eval", FIXTURES / "problems" / "subs" / "double_ok.py", DOUBLING, "ok", None, "every stage passed"),
    ("d_eval", F / "double_isclose_patched.py", DOUBLING, "wrong", "test", f"{PASSED}; the outputs are wrong"),
    ("e_eval", F / "double_match_replaced.py", DOUBLING, "wrong", "test", f"{PASSED}; the outputs are wrong"),
    ("healthy_cloned", FIXTURES / "problems" / "subs" / "double_ok.py", CLONED, "ok", None, "every stage passed"),
    ("c_cloned", F / "double_channel_closed.py", CLONED, "tampered", "test", "never left that process"),
    ("e_cloned", F / "double_match_replaced.py", CLONED, "wrong", "test", f"{PASSED}; the outputs are wrong"),
    ("e_cloned_bench", F / "double_small_only.py", CLONED, "wrong", "benchmark", "check failed on size=256 (output 0)"),
]


def _check(root, case):
    name, sub, problem, *_ = case
    out = root / name
    t0 = time.time()
    res = cli("check", sub, *problem, "--out", out, timeout=400)
    return name, {"res": res, "out": out, "wall": time.time() - t0}


# its tests share one xdist_group: under --dist loadgroup one worker runs them all, so this is built once
@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    root = tmp_path_factory.mktemp("forged")
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(lambda c: _check(root, c), CASES))


@pytest.mark.xdist_group("forged-checks")
@pytest.mark.parametrize("name,sub,problem,status,stage,fragment", CASES, ids=[c[0] for c in CASES])
def test_a_zeros_kernel_behind_a_forged_check_is_never_ok(checked, name, sub, problem, status, stage, fragment):
    got = checked[name]
    res, out = got["res"], got["out"]
    s = json.loads((out / "session.json").read_text())
    v = s["verdict"]
    assert (v["status"], v.get("stage")) == (status, stage), (v, res.stdout[-2000:], res.stderr[-2000:])
    assert fragment in v["message"], v["message"]
    assert ("PASSED ON CPU" in res.stdout) == (status == "ok") and "SAFE" not in res.stdout, res.stdout
    assert res.returncode == (0 if status == "ok" else 1), res.stdout + res.stderr
    row = row_of({"report_dir": str(out), "shown": name, "key": name}, {}, res.returncode, res.stdout, res.stderr,
                 got["wall"], None)
    assert (row.status == "ok") == (status == "ok"), row
    base = next(r for r in s["runs"] if r["role"] == "baseline")
    judged = [st for st in base["stages"] if st["name"] in ("test", "benchmark", "leaderboard")
              and st["status"] != "skipped"]
    if status == "ok":
        # every judged stage kept every output it had to, and the verifier judged each ok, with its cost per case
        for st in judged:
            ver = st["verified"]
            assert ver["outputs"] >= ver["expected"] > 0 and not ver["wrong"] and not ver["missing"], (st["name"], ver)
            assert ver["wall_s"] > 0 and all(c["ms"] > 0 for c in ver["cases"].values()), ver
    else:
        failed = next(st for st in judged if st["status"] == status)
        assert failed["verified"]["wrong" if status == "wrong" else "missing"], failed["verified"]


@pytest.mark.xdist_group("forged-checks")
def test_the_verifier_judges_every_stage_and_the_benchmark_keeps_first_and_last(checked):
    """The healthy built-in file: the test stage's three cases one output each; the benchmark and the leaderboard
    (ranked by the geometric mean: both cases) the first and the last of each case's 50."""
    s = json.loads((checked["healthy"]["out"] / "session.json").read_text())
    base = next(r for r in s["runs"] if r["role"] == "baseline")
    counts = {st["name"]: (st["verified"]["expected"], sorted(st["verified"]["cases"])) for st in base["stages"]
              if st["name"] in ("test", "benchmark", "leaderboard")}
    assert counts == {"test": (3, ["128x64x128", "32x96x64", "64x128x256"]),
                      "benchmark": (4, ["128x128x256", "64x256x512"]),
                      "leaderboard": (4, ["128x128x256", "64x256x512"])}, counts
