"""The search's choice is what it computed, not how it is spelled: whatever its function returns or stores after
timing its candidates (a tuple of two loop variables, sorted(...)[0][1], an object of the submission's own class),
pinned per shape wherever the code reads it next (a SimpleNamespace's attributes, os.environ, a weak table and a
list of objects, a cache bounded below the task's shapes), and candidates timed in other threads or processes belong
to the search that waits for them.

The e2e tests diagnose each style end to end (tests/fixtures/search_styles): four or six candidates at every new
shape cost about 6 s a shape, so three test shapes and the process's start run over a 15 s budget; pinned, every
call is fast (a hand pin took 6.0 to 7.5 s of the 15 s on a busy machine: the start-up and torch's import). The
rest are quick: the pieces on plain values, in this process.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import sys
import threading
import types
import weakref
from concurrent.futures import ThreadPoolExecutor

import pytest

from probes.search import objects
from probes.search.kept import entry_texts, mapping_text
from probes.search.pin import pin, pinned_where
from probes.search.places import _places, added, changed
from probes.search.returns import judged
from probes.search.threads import waiting_chain
from probes.search.watch import Search, literal_text
from tests.conftest import FIXTURES, cli, diagnose_each

STYLES = FIXTURES / "search_styles"


@pytest.fixture
def submission(monkeypatch):
    """A module named as the worker names the submission, holding the classes a test defines in it."""
    mod = types.ModuleType("submission")
    monkeypatch.setitem(sys.modules, "submission", mod)
    return mod


def _own(mod, cls):
    cls.__module__ = "submission"
    setattr(mod, cls.__qualname__, cls)
    return cls


def test_what_the_search_returned_is_its_choice_however_it_is_built():
    """The search's own function returned (block, warps), never held as one value while it timed: its choice, as is
    the same value handed up by a caller; None and a flag are no choice, nor a value of a function that searched
    nothing and holds nothing the search timed."""
    found = [{"func": "config", "def_line": 10}]
    rec = [{"func": "config", "def_line": 10, "key": "(64,)", "text": "(16, 4)", "value": (16, 4)},
           {"func": "pick", "def_line": 20, "key": "(64,)", "text": "(16, 4)", "value": (16, 4)},
           {"func": "count", "def_line": 30, "key": "()", "text": "7", "value": 7},
           {"func": "config", "def_line": 10, "key": "(32,)", "text": "None", "value": None},
           {"func": "config", "def_line": 10, "key": "(16,)", "text": "True", "value": True},
           {"func": "index", "def_line": 40, "key": "()", "text": "(2, 'x')", "value": (2, "x")}]
    got = judged(rec, found, lambda v: v == 2)
    assert [r["linked"] for r in got] == [True, True, False, False, False, True]
    assert all("value" not in r for r in got)


def test_an_object_of_the_submissions_class_is_written_as_source_that_makes_it_again(submission):
    Plan = _own(submission, dataclasses.make_dataclass("Plan", [("block", int), ("warps", int)], frozen=True))
    text = objects.text({(64, 256): Plan(32, 4)})
    assert text == "{(64, 256): _pinned_object(Plan, {'block': 32, 'warps': 4})}"
    assert literal_text([Plan(16, 2)]) == ("[_pinned_object(Plan, {'block': 16, 'warps': 2})]", None)
    ns = {"Plan": Plan}
    exec(objects.OBJECT_SOURCE, ns)       # noqa: S102 - our own helper text
    made = eval(text, ns)                 # noqa: S307 - the text just written from plain values
    assert made == {(64, 256): Plan(32, 4)} and ns["_PINNED_OBJECTS"] == [made[(64, 256)]]
    assert objects.classes(text) == ["Plan"]
    # built of what the search timed: a field took a candidate's value
    assert objects.made_of(lambda v: v == 32, Plan(32, 4)) and not objects.made_of(lambda v: v == 8, Plan(32, 4))
    assert objects.made_of(lambda v: v == 32, "32")          # os.environ holds its text
    # a class of a library's, or a field no literal holds, is not written
    assert objects.text(types.SimpleNamespace(a=1)) is None and objects.text(Plan(object(), 4)) is None
    assert literal_text({"k": object()})[0] is None


def test_a_bounded_cache_is_pinned_with_every_shape_its_searches_added_not_its_end_state():
    cache, entries = collections.OrderedDict(), {}
    for i, shape in enumerate([(64, 256), (128, 128), (32, 64), (64, 512), (128, 256)]):
        before = _places_of(cache)
        cache[shape] = 16 << i
        while len(cache) > 4:
            cache.popitem(last=False)
        for path, pairs in added(before, _places_of(cache)).items():
            entries.setdefault(path, {}).update(entry_texts(pairs))
    text, why, n = mapping_text("dict", cache, entries["_CACHE"])
    assert why is None and n == 5 and "(64, 256): 16" in text, text
    # a library's mapping (the environment): only what the searches added, never the rest of it
    env = {"HOME": "/root", "CHUNK_64": "32"}
    text, why, n = mapping_text("mapping", env, {"'CHUNK_64'": ("'32'", None)})
    assert (text, n) == ("{'CHUNK_64': '32'}", 1)


def _places_of(cache) -> dict:
    return {"_CACHE": ("dict", frozenset(cache), cache)}


def test_the_module_places_include_a_namespace_a_weak_table_and_the_environment(submission, monkeypatch):
    Plan = _own(submission, dataclasses.make_dataclass("Plan", [("block", int)]))
    submission._TUNED = types.SimpleNamespace()
    submission._PLANS = weakref.WeakValueDictionary()
    submission._ALL = []
    before = _places(submission)
    submission._TUNED.m64_k256 = 32
    plan = Plan(32)
    submission._PLANS[(64, 256)] = plan
    submission._ALL.append(plan)
    monkeypatch.setenv("CHUNK_64x256", "32")
    got = {c["path"]: c for c in changed(before, _places(submission), lambda v: v == 32)}
    assert got["_TUNED.m64_k256"]["kind"] == "attr" and got["_TUNED.m64_k256"]["linked"]
    assert got["_PLANS"]["kind"] == "mapping" and got["_PLANS"]["linked"] and got["_PLANS"]["plain"]
    assert got["_ALL"]["linked"] and got["os.environ"]["kind"] == "mapping" and got["os.environ"]["linked"]


def test_the_pins_go_where_the_code_reads_them(submission, monkeypatch):
    monkeypatch.delenv("CHUNK_7", raising=False)
    bare = '"""doc"""\nfrom __future__ import annotations\n\ndef custom_kernel(d):\n    return int(__import__("os")' \
           '.environ["CHUNK_7"])\n'
    env = [{"path": "os.environ", "kind": "mapping", "text": "{'CHUNK_7': '32'}"}]
    made = pin(bare, env)
    assert made.index("import os\nos.environ.update(") > made.index("from __future__")
    ns: dict = {}
    exec(compile(made, "s", "exec"), ns)      # noqa: S102 - a pinned test source
    assert ns["custom_kernel"](None) == 32
    monkeypatch.delenv("CHUNK_7")
    objs = 'import weakref\n_PLANS = weakref.WeakValueDictionary()\n\n\nclass Plan:\n    pass\n\n\n_NS = object()\n'
    places = [{"path": "_PLANS", "kind": "mapping", "text": "{(64,): _pinned_object(Plan, {'block': 32})}"},
              {"path": "_NS.64x256", "kind": "attr", "text": "16"}]
    made = pin(objs.replace("_NS = object()", "import types\n_NS = types.SimpleNamespace()"), places)
    ns = {}
    exec(compile(made, "s", "exec"), ns)      # noqa: S102 - a pinned test source
    assert ns["_PLANS"][(64,)].block == 32 and getattr(ns["_NS"], "64x256") == 16    # alive, and after class Plan
    with pytest.raises(ValueError, match="Nope, which is bound nowhere"):
        pin(objs, [{"path": "_PLANS", "kind": "mapping", "text": "{1: _pinned_object(Nope, {})}"}])
    attrs = [{"path": f"_TUNED.m{i}", "kind": "attr", "text": "1"} for i in range(5)]
    assert pinned_where(attrs) == ("_TUNED's 5 attributes", 5)
    assert pinned_where([{"path": "_PLANS", "kind": "mapping", "entries": 5},
                         {"path": "_ALL", "kind": "list", "entries": 5}]) == ("_PLANS, _ALL", 5)


def _wait_in_pool(search: Search, n: int) -> int:
    def one(c):
        search.read("time.perf_counter", 0.5, sys._getframe(), threading.get_ident())
        search.read("time.perf_counter", 0.5, sys._getframe(), threading.get_ident())
        return c
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(one, c) for c in range(n)]
        return min(f.result() for f in futures)


def test_candidates_timed_in_pool_workers_belong_to_the_search_that_waits_for_them():
    """Each worker times one candidate (two clock reads): no frame of theirs holds three. The phase's thread,
    waiting on their results, does: the search is its frame, and each worker's call is one candidate of it."""
    api = types.SimpleNamespace(submission_dir=__file__, emit=lambda **f: None)
    search = Search(api, "first_call:x")
    assert _wait_in_pool(search, 6) == 0
    (found,) = search.found()
    assert found["func"] == "_wait_in_pool" and found["candidates"] == 6, found
    here = threading.get_ident()
    got = []
    worker = threading.Thread(target=lambda: got.append(waiting_chain(here, __file__)))
    worker.start()
    worker.join()
    assert [f.f_code.co_name for f in got[0]][-1] == "test_candidates_timed_in_pool_workers_belong_to_the_search_" \
                                                      "that_waits_for_them"


# fixture -> (the search as the probe names it, where the pin goes, what the pinned file holds)
CASES = {
    "static_tuple": ("the search in config()", "config()'s return", "return _PINNED_L"),
    "namespace_sorted": ("the search in _tune()'s genexpr", "_TUNED's 3 attributes", "_TUNED.m64_k256 = "),
    "environ_choice": ("the search in _tune()", "os.environ", "os.environ.update({'DUAL_GEMM_CHUNK_64x256': '"),
    "weak_plans": ("the search in _tune()", "_ALL, _PLANS", "_PLANS.update({(64, 256): _pinned_object(Plan, {"),
    "pool_search": ("the search in custom_kernel()", "_BEST", "_BEST.update({"),
    # candidates timed in spawned worker processes (tests/test_search_processes.py: forked ones, and the pieces)
    "process_search": ("the search in custom_kernel()", "_BEST", "_BEST.update({"),
    "bounded_cache": ("the search in _search()", "_CACHE", "_CACHE.update({"),
}


# its tests share one xdist_group: under --dist loadgroup one worker runs them all, so this is built once
@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory):
    """Every style's diagnosis, three at a time (each mostly waits on its candidates' sleeps)."""
    return diagnose_each(tmp_path_factory.mktemp("search-choices"), {n: STYLES / f"{n}.py" for n in CASES},
                         "--stages", "test", "--budget", "15", "--probes", "search")


@pytest.mark.e2e
@pytest.mark.xdist_group("search-choices")
@pytest.mark.parametrize("name", list(CASES))
def test_each_style_of_choice_is_named_and_pinned_per_shape_where_the_code_reads_it(diagnosed, name):
    named, place, written = CASES[name]
    res, out = diagnosed[name]
    s = json.loads((out / "session.json").read_text())
    assert res.returncode == 1 and s["verdict"]["status"] == "timeout", res.stdout[-2000:]
    probe = next(p for p in s["probes"] if p["name"] == "search")
    assert probe["state"] == "run" and named in probe["why"] and "candidates (time.perf_counter)" in probe["why"], \
        probe["why"]
    assert s["fix"] and s["fix"]["toggle"].startswith(f"search results pinned in {place} (3 shapes, +"), s["fix"]
    fix = next(r for r in s["runs"] if r["id"] == s["fix"]["run"])
    assert fix["outcome"] == "ok" and written in fix["variant"], fix["variant"][-1500:]
    # the pin took: its run timed no candidates at any first call
    assert not [e for st in fix["stages"] for e in st["probe_facts"].get("search", []) if e.get("searches")]
    top = s["causes"][0]
    assert top["suspects"] == ["search"] and top["changes_outcome"] and "fixes it" in top["narrative"], top
    audited = cli("report", out / "session.json", "--audit")
    assert audited.returncode == 0 and "are supported" in audited.stdout, audited.stdout
