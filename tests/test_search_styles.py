"""A search that the code runs at each new shape is found from what the run did, in whatever style it is written,
and pinned where the code reads it: a dict filled by the caller, a class attribute, an instance's dict keyed by a
string, functools caches on a function and on a method, and a loop that stores into a module-level dict; timed
with perf_counter, perf_counter_ns, monotonic or time.time, in a loop, a min(key=...), a sorted(key=...) or a
comprehension. Each fixture searches for about 6 s of CPU per new shape: three test shapes and the process's
own start run over a 15 s budget, and with the choice pinned every call is fast (the budget leaves the pinned run
room for a machine three times as busy: at 6 s, a loaded machine once failed the pinned run too). At 3 s a shape
and 9 s, a CPU hog beside the suite left the baseline's first call 2.3 s before its deadline: too few candidates
finished to name the search, or its choice."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from probes.search.hook import Hook
from probes.search.pin import pin
from probes.search.watch import literal_text
from tests.conftest import FIXTURES, cli, diagnose_each

STYLES = {"hand_search": ("_BEST", "_BEST.update({"), "caller_dict": ("_CHOICE", "_CHOICE.update({"),
          "class_attr": ("Tuner.best", "Tuner.best.update({"),
          "instance_dict": ("_TUNER.cache", "_TUNER.cache.update({'m64_k256': "),
          "lru_function": ("_best_chunk", "_best_chunk = _pinned_first(_best_chunk, {(64, 256): "),
          "lru_method": ("Planner.plan", "Planner.plan = _pinned_first(Planner.plan, {((64, 256),): "),
          # each candidate timed by running it until a time has passed: one line reads the clock again and again
          "budget_loop": ("_BEST", "_BEST.update({")}


# its tests share one xdist_group: under --dist loadgroup one worker runs them all, so this is built once
@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory):
    """Every style's diagnosis, three at a time (each mostly waits on its search's sleeps)."""
    return diagnose_each(tmp_path_factory.mktemp("search-styles"), {n: FIXTURES / "search" / f"{n}.py" for n in STYLES},
                         "--stages", "test", "--budget", "15", "--probes", "search")


@pytest.mark.e2e
@pytest.mark.xdist_group("search-styles")
@pytest.mark.parametrize("name", list(STYLES))
def test_a_search_in_any_style_is_found_from_the_run_and_pinned_where_the_code_reads_it(diagnosed, name):
    place, written = STYLES[name]
    res, out = diagnosed[name]
    s = json.loads((out / "session.json").read_text())
    assert res.returncode == 1 and s["verdict"]["status"] == "timeout", res.stdout
    probe = next(p for p in s["probes"] if p["name"] == "search")
    # named from the run: where it ran, what it timed, and where its choice went
    assert "candidates (time." in probe["why"] and f"its choice went to `{place}`" in probe["why"], probe["why"]
    top = s["causes"][0]
    assert top["suspects"] == ["search"] and top["changes_outcome"] and "fixes it" in top["narrative"], top
    # its whole cost: every shape the tuning run searched, and the baseline's first calls up to the deadline
    assert "first call(s) took" in top["narrative"] and "spent" in top["narrative"] and \
        "on its 3 shapes" in top["narrative"], top["narrative"]
    assert s["fix"]["toggle"].startswith(f"search results pinned in {place} (3 shapes, +"), s["fix"]["toggle"]
    fix = next(r for r in s["runs"] if r["id"] == s["fix"]["run"])
    assert fix["outcome"] == "ok" and written in fix["variant"], fix["variant"][-800:]
    assert not [e for st in fix["stages"] for e in st["probe_facts"].get("search", []) if e.get("searches")]
    audit = cli("report", out / "session.json", "--audit")
    assert audit.returncode == 0 and "are supported" in audit.stdout, audit.stdout


def test_a_value_no_literal_holds_is_refused_with_its_type_and_a_place_bound_nowhere_cannot_be_pinned():
    assert literal_text({(64, 256): 128}) == ("{(64, 256): 128}", None)
    text, why = literal_text({"k": object()})
    assert text is None and "object" in why
    with pytest.raises(ValueError, match="bound nowhere"):
        pin("def f():\n    pass\n", [{"path": "_GONE", "kind": "dict", "text": "{1: 2}"}])
    # a cache pinned: the table answers the arguments it has, the search the rest
    src = "import functools\n\n@functools.cache\ndef f(x):\n    raise RuntimeError('searched')\n"
    ns: dict = {}
    exec(compile(pin(src, [{"path": "f", "kind": "cache", "text": "{(1,): 7}"}]), "s", "exec"), ns)
    assert ns["f"](1) == 7
    with pytest.raises(RuntimeError, match="searched"):
        ns["f"](2)
    ast.parse(pin(src, [{"path": "f", "kind": "cache", "text": "{(1,): 7}"}]))


SPIN = '''
import time
def custom_kernel(data):
    end = time.perf_counter() + 0.3
    while time.perf_counter() < end:
        pass
    return data
'''


@pytest.mark.e2e
def test_a_clock_read_in_a_spin_loop_is_not_a_search(tmp_path):
    """One line reading the clock until a moment passes times no candidates: the hook sends no search for it, and
    names it as the wait it took it for (what "not present" then says)."""
    (tmp_path / "submission.py").write_text(SPIN)
    driver = (f"import sys, json; sys.path.insert(0, {str(tmp_path)!r})\n"
              "from probes.search import hook\n"
              "sent = []\n"
              "class Api:\n"
              f"    submission_dir = {str(tmp_path) + '/'!r}\n"
              "    def emit(self, **f): sent.append(f)\n"
              "    def on_phase(self, fn): self.phase = fn\n"
              "    def on_import(self, m, p): pass\n"
              "    def on_stage_end(self, fn): pass\n"
              "    def on_torch(self, fn): pass\n"
              "api = Api(); hook.install(api)\n"
              "import submission\n"
              "api.phase('begin', 'first_call:a', {'case': 'a'}); submission.custom_kernel(1)\n"
              "api.phase('end', 'first_call:a', {'ok': True})\n"
              "print(json.dumps(sent))\n")
    out = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=60, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    sent = json.loads(out.stdout)
    assert [e["what"] for e in sent] == ["phase"] and sent[0]["searches"] == [], sent
    assert sent[0]["waits"] == [{"func": "custom_kernel", "line": 5, "calls": 1}], sent


@pytest.mark.e2e
def test_a_warmup_written_as_a_comprehension_with_its_count_in_a_variable_is_named_at_its_line_and_cut(tmp_path):
    """[_epilogue(r1, r2) for _ in range(_WARMUP)], _WARMUP read from the environment: no for statement, and on
    Python 3.11 no loop counts. The cause is that line (not a line inside the callee), and the count is cut where
    the comprehension reads it."""
    out = tmp_path / "o"
    res = cli("run", FIXTURES / "warmup" / "comprehension_env.py", "--stages", "test", "--budget", "9",
              "--probes", "warmup", "--out", out)
    s = json.loads((out / "session.json").read_text())
    assert res.returncode == 1 and s["verdict"]["status"] == "timeout", res.stdout
    probe = next(p for p in s["probes"] if p["name"] == "warmup")
    assert probe["state"] == "run" and "L32 (N=_WARMUP" in probe["why"], probe
    top = s["causes"][0]
    assert top["suspects"] == ["warmup"] and top["site"]["line"] == 32, top
    assert s["fix"]["toggle"].startswith("warmup N->") and (
        "for _ in range(1)]" in s["fix"]["diff"] or "for _ in range(3)]" in s["fix"]["diff"]), s["fix"]
    assert next(r for r in s["runs"] if r["id"] == s["fix"]["run"])["outcome"] == "ok"


@pytest.mark.e2e
def test_two_causes_that_each_fail_alone_get_one_fix_with_both_edits_verified_as_one_variant(tmp_path):
    """A warmup and a search at each new shape, each over the 7 s budget alone: each toggle alone still times
    out, so the fix is both edits together, run as one variant, and each cause says the other fails it too."""
    out = tmp_path / "o"
    res = cli("run", FIXTURES / "search" / "two_causes.py", "--stages", "test", "--budget", "7", "--out", out)
    s = json.loads((out / "session.json").read_text())
    assert res.returncode == 1 and s["verdict"]["status"] == "timeout", res.stdout
    runs = {r["id"]: r for r in s["runs"]}
    alone = [r for r in runs.values() if r["role"] == "single" and r["probe"] in ("warmup", "search")]
    assert {r["probe"] for r in alone} == {"warmup", "search"} and all(r["outcome"] == "timeout" for r in alone)
    assert sorted(s["causes"][i]["suspects"][0] for i in range(2)) == ["search", "warmup"], s["causes"]
    for c in s["causes"][:2]:
        assert "one of 2 causes that each fail it on their own" in c["narrative"], c["narrative"]
        assert "alone is not enough" in c["narrative"], c["narrative"]
    fix = runs[s["fix"]["run"]]
    assert s["fix"]["toggle"].startswith("together: warmup N->1 + search results pinned in _BEST"), s["fix"]
    assert fix["outcome"] == "ok" and "range(1)" in fix["variant"] and "_BEST.update({" in fix["variant"]
    audit = cli("report", out / "session.json", "--audit")
    assert audit.returncode == 0 and "are supported" in audit.stdout, audit.stdout


@pytest.mark.e2e
def test_where_the_deadline_cuts_the_first_search_the_tuning_run_says_where_its_choice_went(tmp_path):
    """A 6 s budget cannot hold the first call's whole search (6 s of candidates after the process's own start
    and torch's import; at 7 s an idle machine once finished it 0.1 s past the budget's wall), so the baseline's
    phase never ends and never reports what it changed. The tuning run ran every shape to its end: the place the
    choice went comes from there."""
    out = tmp_path / "o"
    res = cli("run", FIXTURES / "search" / "hand_search.py", "--stages", "test", "--budget", "6", "--probes",
              "search", "--out", out)
    s = json.loads((out / "session.json").read_text())
    assert res.returncode == 1 and s["verdict"]["status"] == "timeout", res.stdout
    base = next(r for r in s["runs"] if r["role"] == "baseline")
    firsts = [p for st in base["stages"] for p in st["phases"] if p["name"].startswith("first_call:")]
    assert len(firsts) == 1 and firsts[0]["open"], firsts        # cut off in the first shape's search
    probe = next(p for p in s["probes"] if p["name"] == "search")
    assert "ran it on every shape, and there its choice went to `_BEST`" in probe["why"], probe["why"]
    assert probe["state"] == "run", probe


LOOPS = '''
import time

def spin():
    end = time.perf_counter() + 0.02
    while time.perf_counter() < end:
        pass

def sleeps():
    end = time.perf_counter() + 0.02
    while time.perf_counter() < end:
        time.sleep(0.001)

def work(c):
    return sum(range(c * 50))

def bench(fn, seconds=0.01):
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return (time.perf_counter() - t0) / n

def search(data):
    spin()
    return min((bench(lambda: work(c)), c) for c in (1, 2, 3, 4))[1]

def warmup(data):
    for _ in range(8):
        spin()
        sleeps()
    return data
'''


class _Api:
    def __init__(self, folder):
        self.submission_dir, self.sent = folder, []

    def emit(self, **fields):
        self.sent.append(fields)


def _searches(tmp_path, func: str) -> list[dict]:
    """What the hook sends for one first call of `func` of LOOPS, run from a file of its own folder, its clock
    wrapped as the hook wraps time's (in this module alone: the process's own clocks stay as they are)."""
    path = tmp_path / "submission.py"
    path.write_text(LOOPS)
    hook = Hook(_Api(str(tmp_path) + "/"))
    ns = {}
    exec(compile(LOOPS, str(path), "exec"), ns)
    ns["time"] = types.SimpleNamespace(perf_counter=hook.clock(time.perf_counter, "time.perf_counter", 0.5),
                                       sleep=time.sleep)
    hook.phase("begin", "first_call:a", {"case": "a"})
    ns[func](1)
    hook.phase("end", "first_call:a", {"ok": True})
    assert sys.getprofile() is None          # the watch between reads is gone once the frame is decided
    return [s for e in hook.api.sent if e["what"] == "phase" for s in e["searches"]]


def test_a_loop_that_runs_each_candidate_until_a_time_has_passed_is_a_search_and_a_spin_is_a_wait(tmp_path):
    """`while perf_counter() - t0 < s: fn()` reads one line's clock again and again, as a wait does, but runs a
    candidate between the reads: the search that calls it is named, its reads of one candidate counted as one
    timing, not hundreds. A loop with nothing between its reads (`pass`), or only a sleep, is a wait, and a
    warmup that calls such waits eight times is no search."""
    found = _searches(tmp_path, "search")
    assert [(s["func"], s["path"][0]["func"]) for s in found] == [("<genexpr>", "search")], found
    assert 4 <= found[0]["candidates"] <= 8, found           # 4 candidates; their loop's reads are one timing each
    assert _searches(tmp_path, "warmup") == []
