"""Probe plans and source transforms: each toggle yields valid Python and a diff of exactly the change."""
import textwrap

import pytest
import torch

from diagnose.source.edits import set_kw, unified_diff
from probes import door
from probes.base import ABSENT, NOT_APPLICABLE, RUN, PlanContext
from probes.door import scan as scan_source
from probes.graph_capture.probe import capture_off
from probes.import_init.probe import defer
from tests.conftest import EXAMPLES, FIXTURES

ROUND9 = (EXAMPLES / "round9.py").read_text()


def plans(src, gpu=True, baseline=None, cases=()):
    ctx = PlanContext(src, scan_source(src), gpu, baseline, cases=list(cases))
    return door.results("plan", ctx=ctx)


def changed_lines(diff):
    return [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def test_registry_is_ordered_and_complete():
    names = list(door.names())
    assert names[:2] == ["graph_capture", "compile_mode"]
    assert set(names) >= {"compile_mode", "fullgraph", "warmup", "import_init", "graph_capture", "cache", "recompile",
                          "autotune", "extension_build", "helion", "search"}


def test_round9_every_toggle_is_valid_and_minimal():
    p = plans(ROUND9)
    # each probe says its own state here (its EXPECTED["round9"], with why beside it): adding a probe touches its
    # package alone, and one that says none fails here
    expected = {n: door.value(n, "EXPECTED", {}).get("round9") for n in door.names()}
    assert {n: pl.state for n, pl in p.items()} == expected
    assert expected["graph_capture"] == RUN and expected["search"] == ABSENT    # the table is read, not empty
    for pl in p.values():
        for t in pl.toggles:
            if not t.apply:
                continue
            v = t.apply(ROUND9)
            compile(v, "variant", "exec")
            assert v != ROUND9, t.label
    mode = {t.label: t for t in p["compile_mode"].toggles}
    d = changed_lines(unified_diff(ROUND9, mode["mode=default"].apply(ROUND9)))
    assert d == ['-@torch.compile(mode="max-autotune", fullgraph=True)',
                 "+@torch.compile(mode='default', fullgraph=True)"]
    assert changed_lines(unified_diff(ROUND9, mode["compile off"].apply(ROUND9))) == [
        '-@torch.compile(mode="max-autotune", fullgraph=True)']
    same = mode["same mode, no CUDA graphs"].apply(ROUND9)
    assert same == mode["mode=max-autotune-no-cudagraphs"].apply(ROUND9)   # deduplicated by the engine
    fg = p["fullgraph"].toggles[0].apply(ROUND9)
    assert changed_lines(unified_diff(ROUND9, fg))[1] == '+@torch.compile(mode="max-autotune", fullgraph=False)'
    w1 = {t.label: t for t in p["warmup"].toggles}["warmup N->1"].apply(ROUND9)
    assert changed_lines(unified_diff(ROUND9, w1)).count("+        for _ in range(1):") == 2


def test_toggles_compose():
    p = plans(ROUND9)
    v = ROUND9
    for name in ("graph_capture", "compile_mode", "fullgraph", "warmup"):
        v = next(t for t in p[name].toggles if t.removes).apply(v)
    cache_line = next(i for i, ln in enumerate(ROUND9.splitlines(), 1) if ln.startswith("_santos_cache ="))
    v = defer(v, lines=(next(i for i, ln in enumerate(v.splitlines(), 1) if ln.startswith("_santos_cache =")),))
    assert cache_line
    compile(v, "combined", "exec")
    r = scan_source(v)
    assert r.of("compile")[0].details["mode"] == "max-autotune-no-cudagraphs"
    assert r.of("compile")[0].details["fullgraph"] is False
    assert "_diagnose_eager_graph(" in v and "_diagnose_init_done" in v


def test_graph_capture_is_not_applicable_without_gpu_and_absent_without_capture():
    assert plans(ROUND9, gpu=False)["graph_capture"].state == NOT_APPLICABLE
    assert "CUDA GPU" in plans(ROUND9, gpu=False)["graph_capture"].why
    healthy = (FIXTURES / "healthy.py").read_text()
    assert all(pl.state == ABSENT for pl in plans(healthy).values())


def test_set_kw_adds_keywords_to_bare_and_empty_calls():
    src = "import torch\n@torch.compile\ndef a(x): return x\n@torch.compile()\ndef b(x): return x\n" \
          "c = torch.compile(a)\n"
    v = set_kw(src, None, "dynamic", "True")
    assert "@torch.compile(dynamic=True)\ndef a" in v
    assert "@torch.compile(dynamic=True)\ndef b" in v
    assert "c = torch.compile(a, dynamic=True)" in v


def test_capture_off_rebinds_every_output_and_replays():
    src = textwrap.dedent("""
        import torch

        @torch.compile(backend="eager")
        def f(x):
            return x * 2

        class G:
            def replay(self):
                raise RuntimeError("nothing was captured")

        def make(x):
            g = G()
            with torch.cuda.graph(g):
                y = f(x)
                z = y + 1
            return g, y, z
    """)
    v = capture_off(src)
    ns = {}
    exec(compile(v, "variant", "exec"), ns)
    x = torch.ones(3)
    g, y, z = ns["make"](x)
    assert z.tolist() == [3.0] * 3
    x.fill_(5)
    g.replay()
    assert y.tolist() == [10.0] * 3 and z.tolist() == [11.0] * 3


def test_import_init_defer_moves_work_into_the_first_call():
    src = textwrap.dedent('''
        import time
        calls = []

        class Warm:
            def __init__(self):
                calls.append("init")

        cache = Warm()

        def custom_kernel(data):
            """doc"""
            return (cache, data)
    ''')
    v = defer(src, lines=(next(i for i, ln in enumerate(src.splitlines(), 1) if ln.startswith("cache =")),))
    ns = {}
    exec(compile(v, "variant", "exec"), ns)
    assert ns["calls"] == []                 # nothing at import
    c, d = ns["custom_kernel"](1)
    assert ns["calls"] == ["init"] and d == 1
    ns["custom_kernel"](2)
    assert ns["calls"] == ["init"]           # once


@pytest.mark.parametrize("name", ["recompile"])
def test_recompile_needs_baseline_evidence(name):
    src = (FIXTURES / "corpus" / "rc_limit_fullgraph.py").read_text()
    pl = plans(src, baseline=None)[name]
    assert pl.state == ABSENT and "decided from the baseline" in pl.why


def test_recompile_and_import_work_start_from_the_source_where_it_says_enough():
    """Before the baseline: a compile site that is not dynamic and cases in two shapes will compile again, and a
    module-level call of the file's own class runs its code at import; both toggles can start with the first
    wave. One shape, or dynamic=True everywhere, leaves recompile to the baseline's records."""
    two = [{"m": 64, "n": 64, "k": 64, "seed": 1}, {"m": 128, "n": 64, "k": 64, "seed": 2}]
    p = plans(ROUND9, cases=two)
    assert p["recompile"].state == RUN and "2 shapes" in p["recompile"].why
    assert [t.label for t in p["recompile"].toggles] == ["dynamic=True"]
    assert p["import_init"].state == RUN and p["import_init"].why.startswith("L56 ")
    assert plans(ROUND9, cases=two[:1] * 3)["recompile"].state == ABSENT
    dyn = ROUND9.replace('fullgraph=True)', 'fullgraph=True, dynamic=True)')
    assert plans(dyn, cases=two)["recompile"].state == ABSENT
    # and the capture around a max-autotune function names the likely pair
    assert p["graph_capture"].likely_with == ["compile_mode"]
    assert plans(ROUND9.replace('mode="max-autotune", ', ""))["graph_capture"].likely_with == []


def test_every_probe_declares_its_info():
    assert [i.name for i in door.infos()] == list(door.names())
    for name in door.names():
        i = door.info(name)
        assert i.name == name and i.suspect and i.finds and i.toggles


def test_deferring_moves_what_depends_on_the_moved_work():
    """`torch.compile(_epilogue)` at module level uses `_epilogue`: it moves with it (no NameError)."""
    src = textwrap.dedent('''
        import torch

        class ScaledSwiGLU(torch.nn.Module):
            def forward(self, x):
                return x * 2

        _epilogue = ScaledSwiGLU()
        _compiled = torch.compile(_epilogue, backend="eager")
        CONST = 3

        def custom_kernel(data):
            return _compiled(data) + CONST
    ''')
    line = next(i for i, ln in enumerate(src.splitlines(), 1) if ln.startswith("_epilogue ="))
    v = defer(src, lines=(line,))
    assert "_compiled = torch.compile" not in v.split("def custom_kernel")[0]
    assert "CONST = 3" in v.split("def custom_kernel")[0]        # untouched: it needs nothing moved
    ns = {}
    exec(compile(v, "variant", "exec"), ns)
    assert ns["custom_kernel"](torch.ones(2)).tolist() == [5.0, 5.0]


@pytest.mark.parametrize("loop,expect", [
    ("for _ in range(WARMUP_ITERS):", "for _ in range(1):"),
    ("for _ in range(CFG['warmup']):", "for _ in range(1):"),
    ("for i in range(2, WARMUP_ITERS):", "for i in range(2, 2 + 1):"),
    ("while n < WARMUP_ITERS:", "while n < 1:"),
    ("while time.perf_counter() - t0 < 2.0:", "while time.perf_counter() - t0 < 0:"),
])
def test_warmup_counts_however_they_are_written(loop, expect):
    from probes.warmup.probe import set_count
    src = textwrap.dedent(f'''
        import time
        import torch
        WARMUP_ITERS = 20
        CFG = {{"warmup": 20}}

        def helper(x):
            return torch.relu(x)

        class K:
            def run(self, x):
                n, t0 = 0, time.perf_counter()
                {loop}
                    helper(x)
                    n += 1
                return helper(x)

        def custom_kernel(data):
            return K().run(data)
    ''')
    scan = scan_source(src)
    (site,) = scan.of("warmup")
    assert site.code == loop and site.details["function"] == "K.run"
    v = set_count(src, 1, (site.line,))
    assert expect in v
    compile(v, "variant", "exec")


def test_every_removing_toggle_composes_on_round9_including_evidence_located_ones():
    """Toggles located from the baseline's evidence (import work, warmup loops) find their statements
    again in a source the other toggles have edited: lines move, their text does not."""
    from probes.warmup.probe import set_count
    src = ROUND9
    heavy = next(i for i, ln in enumerate(src.splitlines(), 1) if ln.startswith("_santos_cache ="))
    from probes.import_init.probe import statements_at
    texts = statements_at(src, (heavy,))
    loops = tuple(ln.strip() for ln in src.splitlines() if ln.strip() == "for _ in range(10):")
    v = plans(src)["graph_capture"].toggles[0].apply(src)           # inserts a helper: every line moves
    v = set_count(v, 1, headers=loops)
    v = defer(v, texts=texts)
    compile(v, "combined", "exec")
    assert "for _ in range(10):" not in v and "_diagnose_init_done" in v
    assert "_santos_cache = _SantosGraphCache()" not in v.split("def custom_kernel")[0]
