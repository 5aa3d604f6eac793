"""The static scan on the seed-derived fixtures and on tricky code."""
import textwrap

from probes.door import scan as scan_source
from tests.conftest import EXAMPLES


def scan(code):
    return scan_source(textwrap.dedent(code))


def test_round9_fixture_has_every_suspect_at_its_line():
    src = (EXAMPLES / "round9.py").read_text()
    lines = src.splitlines()
    r = scan_source(src)
    at = {s.suspect: [] for s in r.sites}
    for s in r.sites:
        at[s.suspect].append(s.line)
    assert lines[at["compile"][0] - 1].strip() == '@torch.compile(mode="max-autotune", fullgraph=True)'
    c = r.of("compile")[0].details
    assert (c["mode"], c["fullgraph"], c["target"]) == ("max-autotune", True, "_fused_silu_mul")
    cap = r.of("capture")[0]
    assert lines[cap.line - 1].strip() == "with torch.cuda.graph(graph):"
    assert cap.details["calls_compiled"] == ["_fused_silu_mul"]
    assert cap.details["function"] == "_SantosGraphCache._create_graph"
    assert sorted(s.details["count"] for s in r.of("warmup")) == [10, 10]
    imp = r.of("import_init")
    assert len(imp) == 1 and lines[imp[0].line - 1].startswith("_santos_cache = _SantosGraphCache()")
    assert imp[0].details["calls_compiled"] == ["_fused_silu_mul"]   # through __init__ -> _warmup_fused_kernel


def test_baseline_fixture_has_a_capture_but_nothing_compiled():
    r = scan_source((EXAMPLES / "baseline.py").read_text())
    assert not r.of("compile")
    assert r.of("capture")[0].details["calls_compiled"] == []
    # the 3-iteration loop precedes the capture, so it is a warmup loop
    assert [s.details["count"] for s in r.of("warmup")] == [3]
    assert not r.of("import_init")   # the cache's __init__ only makes a dict


def test_aliased_imports_and_bare_decorators():
    r = scan("""
        import torch as T
        from torch import compile as C
        from torch import compile

        @T.compile
        def a(x): return x

        @C(mode="reduce-overhead")
        def b(x): return x

        @compile()
        def c(x): return x

        d = T.compile(lambda x: x, fullgraph=True, dynamic=False)
        import torch._dynamo
        T._dynamo.config.cache_size_limit = 64
    """)
    comp = {s.details["target"]: s.details for s in r.of("compile")}
    assert set(comp) == {"a", "b", "c", "d"}
    assert comp["a"]["bare"] and comp["a"]["mode"] == "default"
    assert comp["b"]["mode"] == "reduce-overhead"
    assert not comp["c"]["bare"] and comp["c"]["kw"] == {}
    assert comp["d"]["kind"] == "call" and comp["d"]["fullgraph"] is True and comp["d"]["kw"]["dynamic"] is False
    assert [s.details["setting"] for s in r.of("config")] == ["torch._dynamo.config.cache_size_limit"]


def test_not_torch_compile_is_not_a_site():
    r = scan("""
        import re
        pat = re.compile("x")
        def compile(x): return x
        @compile
        def f(): pass
    """)
    assert not r.of("compile")


def test_capture_inside_a_method_reaches_compiled_function_through_a_helper():
    r = scan("""
        import torch
        from torch.cuda import graph as cg

        @torch.compile(mode="max-autotune")
        def epi(x): return x * 2

        def helper(x):
            return epi(x) + 1

        class Runner:
            def build(self, x):
                g = torch.cuda.CUDAGraph()
                with cg(g):
                    y = helper(x)
                return g, y

            def manual(self, x):
                g = torch.cuda.CUDAGraph()
                g.capture_begin()
                y = self.step(x)
                g.capture_end()

            def step(self, x):
                return epi(x)

        graphed = torch.cuda.make_graphed_callables(epi, (torch.ones(1),))
    """)
    caps = {s.details["kind"]: s.details for s in r.of("capture")}
    assert caps["graph_context"]["calls_compiled"] == ["epi"]
    assert caps["graph_context"]["function"] == "Runner.build"
    assert caps["graph_context"]["direct_compiled"] == []   # only through the helper
    assert caps["capture_begin"]["calls_compiled"] == ["epi"]
    assert caps["make_graphed_callables"]["calls_compiled"] == ["epi"]


def test_import_work_classification():
    r = scan("""
        import torch
        torch.manual_seed(0)

        @torch.compile
        def f(x): return x

        class Cheap:
            def __init__(self):
                self.d = {}

        class Busy:
            def __init__(self):
                self.warm()
            def warm(self):
                f(torch.ones(2))

        cheap = Cheap()
        busy = Busy()
        for i in range(3):
            f(torch.ones(i + 1))
        g = torch.compile(f)
    """)
    work = [(s.details["kind"], s.code) for s in r.of("import_init")]
    assert work == [("call", "busy = Busy()"), ("loop", "for i in range(3):")]
    assert r.of("import_init")[0].details["calls_compiled"] == ["f"]


def test_compile_in_every_style_is_located():
    r = scan("""
        import torch
        import torch._inductor.config as icfg
        icfg.max_autotune = True
        torch._inductor.config.triton.cudagraphs = True

        class Epi(torch.nn.Module):
            def forward(self, x): return x

        model = Epi()
        model.compile(mode="max-autotune")
        cm = torch.compile(Epi(), options={"max_autotune": True, "triton.cudagraphs": True})

        class K:
            def __init__(self):
                self.step = torch.compile(self._step, fullgraph=True)
            def _step(self, x): return x

        _fn = None
        def custom_kernel(x):
            global _fn
            if _fn is None:
                _fn = torch.compile(lambda y: y, mode="reduce-overhead")
            return _fn(x)
    """)
    comp = {s.line: s.details for s in r.of("compile")}
    kinds = sorted(d["kind"] for d in comp.values())
    assert kinds == ["call", "call", "call", "module_method"]
    mm = next(d for d in comp.values() if d["kind"] == "module_method")
    assert mm["target"] == "model" and mm["mode"] == "max-autotune" and mm["records_graphs"]
    opt = next(d for d in comp.values() if d["options"])
    assert opt["autotunes"] and opt["records_graphs"]
    lazy = next(d for d in comp.values() if d["mode"] == "reduce-overhead")
    assert lazy["target"] == "_fn" and lazy["records_graphs"]
    assert next(d for d in comp.values() if d.get("target") == "self.step")["fullgraph"] is True
    cfg = {s.details["setting"]: s.details["value"] for s in r.of("config")}
    assert cfg == {"torch._inductor.config.max_autotune": True, "torch._inductor.config.triton.cudagraphs": True}


def test_capture_in_a_closure_inside_a_method_reaches_the_compiled_function():
    r = scan("""
        import torch

        @torch.compile(mode="max-autotune")
        def epi(x): return x * 2

        class Runner:
            def build(self, x):
                def body():
                    return epi(x)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = body()
                return g, out
    """)
    (cap,) = r.of("capture")
    assert cap.details["calls_compiled"] == ["epi"] and cap.details["function"] == "Runner.build"


def test_import_work_skips_settings_and_cheap_objects_and_finds_heavy_forms():
    r = scan("""
        import functools
        import numpy as np
        import torch
        torch.manual_seed(0)
        torch.set_float32_matmul_precision("high")

        class Cheap:
            def __init__(self):
                self.d = {}

        @functools.lru_cache(maxsize=None)
        def table(n): return [i * i for i in range(n)]

        cheap = Cheap()
        squares = {i: table(i) for i in range(100)}
        table(4096)
        arr = np.array([1, 2, 3])
        if torch.cuda.is_available():
            torch.randn(4, device="cuda").sum()
    """)
    found = [(s.details["kind"], s.code) for s in r.of("import_init")]
    assert found == [("comprehension", "squares = {i: table(i) for i in range(100)}"), ("call", "table(4096)"),
                     ("call", "arr = np.array([1, 2, 3])"), ("if", "if torch.cuda.is_available():")]


def test_a_source_too_deep_to_parse_is_reported_not_raised():
    r = scan_source("x = " + " + ".join(["1"] * 100000) + "\ndef custom_kernel(d): return d\n")
    assert r.sites == [] and "could not scan" in r.error


def test_each_suspects_sites_come_from_its_own_probes_finder():
    """The scan finds what every suspect shares (compile calls, compiler settings); every other site kind comes
    from one probe's finder (its package's find.py), which finds the sites its INFO.sites reads: a site kind that
    two finders made, or that no probe reads, would be knowledge of one probe kept in another place."""
    from diagnose.source.scan import scan_source as own_scan
    from probes import door
    from probes.finders import finders
    from tests.conftest import FIXTURES
    sources = [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.rglob("*.py"))] + \
        [p.read_text(encoding="utf-8") for p in sorted(EXAMPLES.glob("*.py"))]
    own = {s.suspect for src in sources for s in own_scan(src, finders=()).sites}
    assert own == {"compile", "config"}, own
    made: dict[str, set[str]] = {}
    for find in finders():
        info = door.info(find.__module__.split(".")[1])
        kinds = {s.suspect for src in sources for s in own_scan(src, finders=[find]).sites} - own
        assert kinds, f"{info.name}'s finder found nothing in {len(sources)} sources: this checks nothing"
        made.update({k: made.get(k, set()) | {info.name} for k in kinds})
        assert set(info.sites) - own <= kinds, (info.name, info.sites, kinds)
    assert len(made) >= 6 and all(len(by) == 1 for by in made.values()), made
    read = {k for i in door.infos() for k in i.sites}
    assert set(made) - read <= {"helion_table"}, set(made) - read     # a per-shape table: the helion pins edit it
    full = {s.suspect for src in sources for s in door.scan(src).sites}
    assert full == own | set(made)
