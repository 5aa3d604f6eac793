"""The search's choice is what it picked, pinned where the code reads it, in keeping styles and with clocks the first
style tests do not use; and a pin counts only where its run shows the search gone.

Each fixture (tests/fixtures/search_styles) builds four candidates for 0.5 s each (a wait: it holds on a loaded
machine) and times them at every new shape: about 2 s a shape, three test shapes and the process's start over a
6 s budget. Pinned, the stage takes about 1.5 s here: room for a machine three times as busy.
"""
from __future__ import annotations

import json

import pytest

from diagnose.analysis.audit.audit import audit
from diagnose.findings import Cause
from diagnose.session import Session
from diagnose.status import CauseKind, Confidence
from tests.conftest import FIXTURES, cli

pytestmark = pytest.mark.e2e     # every test here starts real processes

STYLES = FIXTURES / "search_styles"
# fixture -> (the clock the hook names, where the pin goes)
CASES = {
    "static_lru_counter": ("time.perf_counter", "_search()'s return"),    # beside a counter that changes per shape
    # timeit's default_timer is time.perf_counter, watched as that where timeit was imported after the hook
    "classmethod_cache": ("time.perf_counter", "best()'s return"),
    "closure_cache": ("time.process_time", "search()'s return"),
    "list_string_key": ("timeit.timeit", "_CHOICES"),                    # a list, bound inside an `if`
    "try_tuple": ("torch.utils.benchmark.Timer.timeit", "_BEST"),        # a tuple under a string key, bound in try
    "thread_search": ("time.perf_counter", "_BEST"),                     # the search runs in another thread
    "cached_property_plan": ("time.thread_time", "chunk()'s return"),    # per-shape plan objects in a dict
}


def _diagnose(tmp_path, name: str) -> dict:
    out = tmp_path / "o"
    res = cli("run", STYLES / f"{name}.py", "--stages", "test", "--budget", "6", "--probes", "search", "--out", out)
    s = json.loads((out / "session.json").read_text())
    assert res.returncode == 1 and s["verdict"]["status"] == "timeout", res.stdout[-2000:]
    audited = cli("report", out / "session.json", "--audit")
    assert audited.returncode == 0 and "are supported" in audited.stdout, audited.stdout
    return s


@pytest.mark.parametrize("name", list(CASES))
def test_each_keeping_style_and_clock_ends_in_a_verified_pin_of_what_the_search_picked(tmp_path, name):
    clock, place = CASES[name]
    s = _diagnose(tmp_path, name)
    probe = next(p for p in s["probes"] if p["name"] == "search")
    assert clock in probe["why"] and probe["state"] == "run", probe["why"]
    assert s["fix"] and s["fix"]["toggle"].startswith(f"search results pinned in {place} (3 shapes, +"), s["fix"]
    assert "calls" not in s["fix"]["toggle"]          # never the counter beside the search
    fix = next(r for r in s["runs"] if r["id"] == s["fix"]["run"])
    assert fix["outcome"] == "ok"
    # the pin took: its run timed no candidates at any first call
    assert not [e for st in fix["stages"] for e in st["probe_facts"].get("search", []) if e.get("searches")]
    top = s["causes"][0]
    assert top["suspects"] == ["search"] and top["changes_outcome"] and "fixes it" in top["narrative"], top


def test_a_pin_that_did_not_take_proves_nothing_and_the_audit_refuses_a_cause_resting_on_it(tmp_path):
    """The search's key carries the id of the call's data: the tuning run's table never matches a timed call, so the
    pinned run still searches and times out. That run took nothing away: no fix, no 'too slow wherever it runs', no
    'the cause is in that code itself'; the report says the pin did not take."""
    s = _diagnose(tmp_path, "untaken_pin")
    # where the time went may be said (a hot spot the sampler caught), but never a cause that rests on the pin
    assert s["fix"] is None and not [c for c in s["causes"] if c["kind"] in ("too_slow", "bug", "mechanism")]
    pinned = next(r for r in s["runs"] if r["probe"] == "search" and r["role"] == "single")
    assert pinned["outcome"] == "timeout"
    said = " ".join([i["reason"] for i in s["inconclusive"]] + [c["narrative"] for c in s["causes"]])
    # on a busy machine its solo rerun decides it (evidence.decider), and the sentence names that run
    deciders = [pinned["id"]] + [r["id"] for r in s["runs"] if r["role"] == "confirm" and r["confirms"] == pinned["id"]]
    assert "the pin did not take" in said and any(f"{i} still searched" in said for i in deciders), said
    assert "proves nothing" in said or "settle neither that suspect nor the code itself" in said, said
    # the audit re-derives it: the old conclusion, "too slow wherever it runs" on that run, fails
    session = Session.from_dict(s)
    session.causes = [Cause(rank=1, suspects=[], kind=CauseKind.TOO_SLOW, confidence=Confidence.HIGH,
                            changes_outcome=False, evidence=[session.baseline.id, pinned["id"]],
                            narrative="The work itself is too slow wherever it runs: every variant timed out too.")]
    found = [f for f in audit(session) if f.rule == "untaken"]
    assert found and "its run took nothing away" in found[0].missing, found


TIMEIT_FIRST = '''
from timeit import default_timer as clock

_BEST = {}


def custom_kernel(data):
    if data not in _BEST:
        costs = []
        for c in (1, 2, 3, 4):
            t0 = clock()
            sum(range(20000 * c))
            costs.append((clock() - t0, c))
        _BEST[data] = min(costs)[1]
    return _BEST[data]
'''


def test_timeits_default_timer_bound_before_the_hook_still_times_candidates(tmp_path):
    """timeit imported (and its default_timer bound to the unwatched clock) before the hook installs: the hook
    watches timeit.default_timer itself, so a submission that imports it from there is seen searching, and the
    choice it keeps is linked to the candidates it timed."""
    import subprocess
    import sys
    (tmp_path / "submission.py").write_text(TIMEIT_FIRST)
    driver = (f"import sys, json, timeit; sys.path.insert(0, {str(tmp_path)!r})\n"
              "from probes.search import hook\n"
              "sent = []\n"
              "class Api:\n"
              f"    submission_dir = {str(tmp_path) + '/'!r}\n"
              "    def emit(self, **f): sent.append(f)\n"
              "    def on_phase(self, fn): self.phase = fn\n"
              "    def on_import(self, m, p): p(sys.modules[m]) if m in sys.modules else None\n"
              "    def on_stage_end(self, fn): pass\n"
              "    def on_torch(self, fn): pass\n"
              "api = Api(); hook.install(api)\n"
              "import submission\n"
              "api.phase('begin', 'first_call:a', {'case': 'a'}); submission.custom_kernel(7)\n"
              "api.phase('end', 'first_call:a', {'ok': True})\n"
              "print(json.dumps([e for e in sent if e.get('what') == 'phase']))\n")
    out = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=60, check=True,
                         cwd=FIXTURES.parent.parent)
    phase = json.loads(out.stdout)[0]
    assert phase["searches"][0]["clocks"] == ["timeit.default_timer"] and phase["searches"][0]["candidates"] == 4
    assert [(c["path"], c["linked"]) for c in phase["changed"]] == [("_BEST", True)], phase["changed"]
