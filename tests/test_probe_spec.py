"""The probe contract (probes/spec.py): every registered probe holds to it, and a probe that does not is refused
at import with a message naming the probe and what it lacks."""
import subprocess
import sys
import textwrap

import pytest

import probes
from probes import door, spec
from probes.base import ProbeInfo
from tests.conftest import ROOT


def test_every_registered_probe_holds_to_the_contract():
    mods = door.modules()
    assert len(mods) >= 12
    assert {m.__name__: spec.problems(m) for m in mods} == {m.__name__: [] for m in mods}


def _write_probe(tmp_path, name: str, body: str):
    """A probe package of its own, its probe.py importable as probes.<name>.probe (probes is a namespace the test
    extends)."""
    pkg = tmp_path / "probes" / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""A probe of the test\'s."""\n')
    (pkg / "probe.py").write_text(textwrap.dedent(body))
    return pkg


GOOD = """
    from probes.base import ABSENT, Plan, ProbeInfo
    INFO = ProbeInfo("{name}", "a suspect", "how", "what", describe="it", sites=(), mechanisms={mechs})
    {extra}
    def plan(ctx):
        return Plan(ABSENT, "never")
"""


def _fake(monkeypatch, tmp_path, name, mechs="()", extra="", plan=None):
    body = GOOD.format(name=name, mechs=mechs, extra=extra)
    if plan is not None:
        body = body.replace("def plan(ctx):", plan)
    _write_probe(tmp_path, name, body)
    monkeypatch.setattr(probes, "__path__", [*probes.__path__, str(tmp_path / "probes")])
    import importlib
    sys.modules.pop(f"probes.{name}", None)
    sys.modules.pop(f"probes.{name}.probe", None)
    return importlib.import_module(f"probes.{name}.probe")


def test_a_probe_that_holds_is_registered(monkeypatch, tmp_path):
    ok = _fake(monkeypatch, tmp_path, "fake_ok", mechs='("fake_lib",)', extra='MECHANISM_WORDS = {"fake_lib": "x"}')
    assert spec.register([ok]) == [ok]


@pytest.mark.parametrize("name, kwargs, says", [
    ("fake_noplan", {"plan": "def other(ctx):"}, "it has no plan (plan(ctx: PlanContext) -> Plan)"),
    ("fake_args", {"plan": "def plan(ctx, more):"}, "plan asks for more, which the specification does not pass"),
    ("fake_named", {"extra": "def took(base, variant): return None"}, "took asks for variant, which the spec"),
    ("fake_star", {"extra": "def took(*runs): return None"}, "took takes runs, which a call by name cannot fill"),
    ("fake_took", {"extra": "took = 3"}, "took is a int, not a function"),
    ("fake_words", {"mechs": '("lib_a",)'}, "MECHANISM_WORDS does not say lib_a"),
    ("fake_stray", {"extra": 'MECHANISM_HINTS = {"other": "; do"}'}, "MECHANISM_HINTS names other, which"),
    ("fake_triage", {"extra": "TRIAGE = 1"}, "TRIAGE is a int, not a str"),
    ("fake_spans", {"extra": "def spans(step, phase): return []"}, "spans asks for phase, which the specification"),
    ("fake_measure", {"extra": "INFO = ProbeInfo('fake_measure', 's', 'h', 'w', describe='d', sites=(), "
                               "takes_away='measure')"},
     "INFO.takes_away is 'measure', which measures its measure: it has none"),
])
def test_a_wrong_or_missing_hook_fails_with_a_clear_message(monkeypatch, tmp_path, name, kwargs, says):
    bad = _fake(monkeypatch, tmp_path, name, **kwargs)
    with pytest.raises(spec.ProbeContractError) as e:
        spec.register([bad])
    assert f"probes.{name}.probe: {says}" in str(e.value)


def test_a_probe_named_apart_from_its_package_or_twice_is_refused(monkeypatch, tmp_path):
    a = _fake(monkeypatch, tmp_path, "fake_a")
    b = _fake(monkeypatch, tmp_path, "fake_b")
    monkeypatch.setattr(b, "INFO", ProbeInfo("fake_a", "s", "f", "t", describe="d", sites=()))
    with pytest.raises(spec.ProbeContractError) as e:
        spec.register([a, b])
    assert "probes.fake_b.probe: INFO.name is 'fake_a', its package is 'fake_b'" in str(e.value)
    assert "two probes are named 'fake_a'" in str(e.value)


@pytest.mark.e2e
def test_the_registry_refuses_a_broken_probe_at_import(tmp_path):
    """A real import of the registry, in its own process, with one probe's plan taking the wrong arguments."""
    copy = tmp_path / "repo"
    subprocess.run(["cp", "-r", str(ROOT / "probes"), str(ROOT / "diagnose"), str(copy.mkdir() or copy)], check=True)
    init = copy / "probes" / "cache" / "probe.py"
    init.write_text(init.read_text().replace("def plan(ctx: PlanContext)", "def plan(ctx: PlanContext, extra)"))
    r = subprocess.run([sys.executable, "-c", "import probes.door"], cwd=copy, capture_output=True, text=True,
                       timeout=60, env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"})
    assert r.returncode != 0
    assert "probes.cache.probe: plan asks for extra, which the specification does not pass" in r.stderr


def test_a_first_call_timeout_is_classed_by_its_probes_own_word():
    """triage/classes.py holds no probe's name: each probe's TRIAGE says its class, read through the registry."""
    from diagnose.triage.classes import cause_class
    from diagnose.triage.rows import Row
    row = Row(status="timeout", phase="first_call:k=1", stage="test")
    top = {"suspects": ["extension_build", "helion", "recompile", "import_init"]}
    assert cause_class(row, {"causes": [top]}) == "first call (autotune, build, compile)"
    assert cause_class(row, {"causes": [{"suspects": ["import_init"]}]}) == "first call"
