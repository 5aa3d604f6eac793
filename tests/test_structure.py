"""The code's shape, checked: modules stay small enough to read alone; the folders follow the data flow
(source -> runs -> analysis -> output, with the engine and the CLI driving them) and import only down that
flow; the parent's runner and the child's worker talk only through protocol.py (neither imports the other)."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE = sorted(p for d in ("diagnose", "probes") for p in (ROOT / d).rglob("*.py"))
MAX_LINES = 300


def _imports(path: Path, submodules: bool = False) -> set[str]:
    """The modules a file imports; with `submodules`, `from pkg import mod` also names pkg.mod."""
    out = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.ImportFrom) and n.module:
            out.add(n.module)
            if submodules:
                out.update(f"{n.module}.{a.name}" for a in n.names)
        elif isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
    return out


def test_no_module_is_over_300_lines():
    long = {str(p.relative_to(ROOT)): n for p in CODE
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def test_worker_and_runner_never_import_each_other():
    crossing = []
    for side, other in (("worker", "runner"), ("runner", "worker")):
        for p in (ROOT / "diagnose" / "runs" / side).rglob("*.py"):
            crossing += [f"{p.relative_to(ROOT)} imports {m}" for m in _imports(p)
                         if m == f"diagnose.runs.{other}" or m.startswith(f"diagnose.runs.{other}.")]
    assert not crossing, crossing


def test_the_check_sees_what_it_checks():
    # the lists above are not empty by accident: both sides exist and import the protocol
    assert len(CODE) > 40
    assert "diagnose.runs.protocol" in _imports(ROOT / "diagnose" / "runs" / "worker" / "main.py")
    assert "diagnose.runs.protocol" in _imports(ROOT / "diagnose" / "runs" / "runner" / "stages.py")


# What each folder may import from the others: only what comes before it in the data flow, and the shared
# records (session, status, errors, findings). The engine and the CLI drive the rest and may import it. The
# probes (a package of their own) read the source and the run facts, never the analysis that reads them. An entry
# "folder.module" allows that one module: a triage's controller is a subreaper as the runner and the worker are
# (runs/subreaper.py, which imports nothing), and takes nothing else of the runs.
SHARED = {"session", "status", "errors", "findings"}
MAY_IMPORT = {"source": SHARED, "tasks": SHARED | {"source"}, "runs": SHARED | {"tasks"}, "facts": SHARED,
              "analysis": SHARED | {"runs", "facts", "tasks"}, "output": SHARED | {"analysis", "facts", "triage"},
              "triage": SHARED | {"runs.subreaper"}}
RECORDS = {"session": {"status", "findings"}, "findings": {"status"}, "status": set(), "errors": set()}
PROBES_MAY_IMPORT = SHARED | {"source", "facts"}


def up_the_flow(root: Path) -> list[str]:
    """Each import of a folder of diagnose/ that MAY_IMPORT does not allow it."""
    wrong = []
    for pkg, allowed in MAY_IMPORT.items():
        for p in sorted((root / "diagnose" / pkg).rglob("*.py")):
            wrong += [f"{p.relative_to(root)} imports {m}" for m in sorted(_imports(p)) if m.startswith("diagnose.")
                      and m.split(".")[1] not in allowed | {pkg} and ".".join(m.split(".")[1:3]) not in allowed]
    return wrong


def test_one_allowed_module_allows_that_module_alone(tmp_path):
    (tmp_path / "diagnose" / "triage").mkdir(parents=True)
    (tmp_path / "diagnose" / "triage" / "t.py").write_text(
        "from diagnose.runs.subreaper import become_subreaper\nfrom diagnose.runs import subreaper\n"
        "from diagnose.runs.runner import isolate\nimport diagnose.session")
    assert up_the_flow(tmp_path) == ["diagnose/triage/t.py imports diagnose.runs",
                                     "diagnose/triage/t.py imports diagnose.runs.runner"]


def test_folders_import_only_down_the_data_flow():
    wrong = up_the_flow(ROOT)
    assert not wrong, wrong
    # analysis reads the runner's model of a container's paths, never the processes' code
    assert not [m for p in (ROOT / "diagnose" / "analysis").rglob("*.py") for m in _imports(p)
                if m.startswith(("diagnose.runs.worker", "diagnose.runs.runner.isolate",
                                 "diagnose.runs.runner.stages"))]


# The analysis, split by what each part decides, each importing only those before it: what the runs show and the
# verdict, what each toggle changed, the causes and the fix, and the claims with the audit that checks them.
ANALYSIS_ORDER = ["verdict", "effects", "causes", "audit"]


def analysis_arrows_up(root: Path) -> list[str]:
    """Each import inside diagnose/analysis/ that reaches a subpackage later in ANALYSIS_ORDER (so none forms a
    circle), and each module that sits outside the subpackages (the folder's own __init__.py aside)."""
    wrong, base = [], root / "diagnose" / "analysis"
    for p in sorted(base.rglob("*.py")):
        rel = p.relative_to(base)
        if len(rel.parts) == 1:
            wrong += [] if rel.name == "__init__.py" else [f"{p.relative_to(root)} sits outside the subpackages"]
            continue
        if rel.parts[0] not in ANALYSIS_ORDER:
            wrong.append(f"{p.relative_to(root)} is in no subpackage of ANALYSIS_ORDER")
            continue
        mine = ANALYSIS_ORDER.index(rel.parts[0])
        for m in sorted(_imports(p, submodules=True)):
            parts = m.split(".")
            if parts[:2] == ["diagnose", "analysis"] and len(parts) > 2 and parts[2] in ANALYSIS_ORDER \
                    and ANALYSIS_ORDER.index(parts[2]) > mine:
                wrong.append(f"{p.relative_to(root)} imports {m}")
    return wrong


def test_the_analysis_subpackages_import_only_those_before_them():
    wrong = analysis_arrows_up(ROOT)
    assert not wrong, wrong
    for sub in ANALYSIS_ORDER:
        doc = ast.get_docstring(ast.parse((ROOT / "diagnose" / "analysis" / sub / "__init__.py").read_text()))
        assert doc and "Takes" in doc and "give" in doc, (sub, doc)      # says what it takes and gives
        assert len(list((ROOT / "diagnose" / "analysis" / sub).glob("*.py"))) > 2, sub


def test_the_analysis_rule_bites(tmp_path):
    files = {"diagnose/analysis/verdict/summary.py": "from diagnose.analysis.causes import bisector",
             "diagnose/analysis/effects/effects.py": "from diagnose.analysis.verdict.evidence import thin",
             "diagnose/analysis/causes/unfixed.py": "def f():\n    from diagnose.analysis.audit.claims import Claim",
             "diagnose/analysis/flat.py": "", "diagnose/analysis/other/x.py": "", "diagnose/analysis/__init__.py": ""}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert analysis_arrows_up(tmp_path) == [
        "diagnose/analysis/causes/unfixed.py imports diagnose.analysis.audit.claims",
        "diagnose/analysis/causes/unfixed.py imports diagnose.analysis.audit.claims.Claim",
        "diagnose/analysis/flat.py sits outside the subpackages",
        "diagnose/analysis/other/x.py is in no subpackage of ANALYSIS_ORDER",
        "diagnose/analysis/verdict/summary.py imports diagnose.analysis.causes",
        "diagnose/analysis/verdict/summary.py imports diagnose.analysis.causes.bisector"]


def test_the_top_level_holds_only_the_folders_and_the_shared_records():
    flat = sorted(p.name for p in (ROOT / "diagnose").glob("*.py"))
    assert flat == ["__init__.py", "__main__.py", "errors.py", "findings.py", "session.py", "status.py"], flat
    for pkg in ("source", "runs", "facts", "analysis", "output", "engine", "cli", "triage"):
        doc = ast.get_docstring(ast.parse((ROOT / "diagnose" / pkg / "__init__.py").read_text(encoding="utf-8")))
        assert doc and "Takes" in doc and "give" in doc, (pkg, doc)      # says what it takes and gives


@pytest.mark.e2e
def test_the_readmes_probe_table_is_what_diagnose_probes_prints():
    """The README's table is generated (`diagnose probes --format md`), never a second hand-written copy of
    each probe's INFO: a probe added or reworded without regenerating it fails here."""
    import re
    import subprocess
    import sys
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- probes:[^\n]*-->\n(.*?)\n\s*<!-- /probes -->", text, re.S).group(1)
    shown = "\n".join(line.strip() for line in block.splitlines()) + "\n"
    made = subprocess.run([sys.executable, "-m", "diagnose", "probes", "--format", "md"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True).stdout
    assert shown == made


def _package(module: str) -> str | None:
    """The folder (or top-level record module) a module belongs to: 'analysis', 'session', 'probes'."""
    parts = module.split(".")
    if parts[0] == "probes":
        return "probes"
    return parts[1] if parts[0] == "diagnose" and len(parts) > 1 else None


def test_the_records_sit_at_the_bottom_and_the_probes_read_only_facts():
    wrong = []
    for rec, allowed in RECORDS.items():
        wrong += [f"diagnose/{rec}.py imports {m}" for m in _imports(ROOT / "diagnose" / f"{rec}.py")
                  if m.startswith("diagnose.") and _package(m) not in allowed]
    for p in (ROOT / "probes").rglob("*.py"):
        wrong += [f"{p.relative_to(ROOT)} imports {m}" for m in _imports(p)
                  if m.startswith("diagnose.") and _package(m) not in PROBES_MAY_IMPORT]
    assert not wrong, wrong


def test_no_circle_between_folders():
    """Between folders (diagnose's packages, the records and probes), imports form no circle."""
    edges: dict[str, set[str]] = {}
    for p in CODE:
        rel = p.relative_to(ROOT).with_suffix("")
        me = _package(".".join(rel.parts))
        for m in _imports(p):
            other = _package(m)
            if me and other and other != me and (m.startswith("diagnose.") or m.startswith("probes")):
                edges.setdefault(me, set()).add(other)

    def reaches(a: str, b: str) -> bool:
        seen, todo = set(), [a]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt == b:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False
    circles = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if reaches(b, a)})
    assert not circles, circles


MAX_FUNCTION_LINES = 60


def test_no_function_is_over_60_lines():
    long = []
    for p in CODE:
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES:
                long.append(f"{p.relative_to(ROOT)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)")
    assert not long, long


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def test_no_circle_between_modules():
    """Inside a folder too, no two modules need each other (a lazy import inside a function counts): the
    worker's stages and timing had reached into each other's private names."""
    known = {_module_of(p) for p in CODE}
    edges = {_module_of(p): {m for m in _imports(p, submodules=True) if m in known} for p in CODE}
    # a package's __init__ re-exporting its modules is not a dependency of theirs on it
    edges = {a: {b for b in bs if not (a.startswith(b + ".") and b in known)} for a, bs in edges.items()}
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v: str) -> None:     # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert not circles, circles


def test_a_probe_with_evidence_of_its_own_keeps_it_in_its_own_package():
    """Adding a probe that needs new evidence is its package plus one registry line: the worker loads the hook that
    the probe's INFO names (worker/plugins.py), the runner keeps its events as they came (stage_facts), and only the
    probe reads them. So the hook lives in the probe's package and imports nothing of diagnose's (the worker
    imports nothing above it); and no module of diagnose's names a probe's hook or reads one probe's facts."""
    from probes import door
    hooked = [m for m in door.modules() if m.INFO.hook]
    assert hooked, "no probe records evidence of its own: this test checks nothing"
    wrong = []
    for mod in hooked:
        pkg = mod.__name__.rsplit(".", 1)[0]
        if not (mod.__file__.endswith("probe.py") and mod.INFO.hook.startswith(pkg + ".")):
            wrong.append(f"{pkg}: its hook {mod.INFO.hook} is not in its own package")
        path = ROOT / (mod.INFO.hook.replace(".", "/") + ".py")
        own = [m for m in _imports(path) if m.startswith(("diagnose", "probes")) and not m.startswith(pkg)]
        wrong += [f"{path.relative_to(ROOT)} imports {m}" for m in own]
        for sib in path.parent.glob("*.py"):       # what the hook imports of its package: no diagnose either
            if sib.stem in {m.rsplit(".", 1)[-1] for m in _imports(path)}:
                wrong += [f"{sib.relative_to(ROOT)} (loaded by the hook) imports {m}" for m in _imports(sib)
                          if m.startswith("diagnose")]
    for p in (ROOT / "diagnose").rglob("*.py"):
        text = p.read_text(encoding="utf-8")
        wrong += [f"{p.relative_to(ROOT)} names {m.INFO.hook}" for m in hooked if m.INFO.hook in text]
        wrong += [f"{p.relative_to(ROOT)} reads {m.INFO.name}'s facts" for m in hooked
                  if f'probe_facts["{m.INFO.name}"]' in text or f"probe_facts.get(\"{m.INFO.name}\"" in text]
    assert not wrong, wrong


def _names_in(path: Path) -> tuple[set[str], set[str]]:
    """What a module's code (not its docstrings) names: (string literals and definitions, attribute names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    said, attrs = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            said.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            said.add(n.name)
        elif isinstance(n, ast.keyword) and n.arg:
            said.add(n.arg)
        elif isinstance(n, ast.alias):
            said.update(n.name.split("."))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            said.add(n.value)
        elif isinstance(n, ast.Attribute):
            attrs.add(n.attr)
    return said, attrs


def probe_files() -> dict[str, list[str]]:
    """Per probe, the modules of diagnose/ whose code names it (its name as a literal or a definition) or one of
    the words that carry its evidence (its WORDS, its INFO.mechanisms, as any name): what it knows outside its
    package."""
    from probes import door
    names = {p.relative_to(ROOT).as_posix(): _names_in(p) for p in sorted((ROOT / "diagnose").rglob("*.py"))}
    out = {}
    for i in door.infos():
        words = {*door.value(i.name, "WORDS", ()), *i.mechanisms}
        out[i.name] = [f for f, (said, attrs) in names.items() if i.name in said or words & (said | attrs)]
    return out


# The probes whose knowledge still lies outside their package, and in how many files of diagnose/ (issue 48's
# target is at most 2 each). Exact, so that moving a probe's knowledge home must lower its entry here, and one
# that reaches 2 leaves the table.
STILL_SPREAD: dict[str, int] = {}


def test_a_probe_lives_in_its_package():
    spread = {name: files for name, files in probe_files().items() if len(files) > 2}
    assert {n: len(f) for n, f in spread.items()} == STILL_SPREAD, spread
    # the words are read from the registry: a probe that carries evidence names it, so the count can see it
    from probes import door
    assert all(door.value(n, "WORDS") for n in ("extension_build", "autotune", "helion"))


# The one door (probes/door.py): diagnose/ reaches the probes through it (and the plain types of probes/base.py),
# never by importing a probe's package; the door's module list is for the contract's tests alone.
DOOR = {"probes", "probes.door", "probes.base"}


def _probe_packages(root: Path) -> set[str]:
    return {d.name for d in (root / "probes").iterdir() if (d / "__init__.py").is_file()}


def behind_the_door(root: Path) -> list[str]:
    """Each import in diagnose/ (a lazy one inside a function too) that reaches past the door into the probes."""
    wrong = []
    for p in sorted((root / "diagnose").rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for m in sorted(_imports(p, submodules=True)):
            if m.split(".")[0] == "probes" and m not in DOOR and not m.startswith(("probes.door.", "probes.base.")):
                wrong.append(f"{p.relative_to(root)} imports {m}")
        wrong += [f"{p.relative_to(root)}:{n.lineno} takes the door's module list" for n in ast.walk(tree)
                  if isinstance(n, ast.Attribute) and n.attr == "modules" and getattr(n.value, "id", "") == "door"]
    return wrong


def arrows_back_up(root: Path) -> list[str]:
    """Inside probes/: the modules below the probes (probes/*.py: the contract, the types, the registry's names,
    the finders, the door) import no probe's package (the door and the finders load them by name), a probe's
    package imports neither the door nor the registry, and no package's __init__ imports anything (a run's
    process that loads a hook must load nothing else)."""
    pkgs, wrong = _probe_packages(root), []
    for p in sorted((root / "probes").rglob("*.py")):
        rel, mods = p.relative_to(root), _imports(p, submodules=True)
        if p.name == "__init__.py":
            wrong += [f"{rel} imports {m}" for m in sorted(_imports(p) - {"__future__"})]
        elif p.parent.name == "probes":
            wrong += [f"{rel} imports {m}" for m in sorted(mods) if m.split(".")[:2][-1] in pkgs
                      and m.startswith("probes.")]
        else:
            wrong += [f"{rel} imports {m}" for m in sorted(mods) if m in ("probes.door", "probes.registry")]
    return wrong


def test_diagnose_reaches_the_probes_only_through_the_door():
    wrong = behind_the_door(ROOT)
    assert not wrong, wrong
    users = [p for p in (ROOT / "diagnose").rglob("*.py") if "probes.door" in _imports(p, submodules=True)]
    assert len(users) >= 15, len(users)       # the check sees what it checks: the analysis, output, triage, engine


def test_no_arrow_runs_back_up_inside_probes():
    wrong = arrows_back_up(ROOT)
    assert not wrong, wrong


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in {**{f"probes/{n}/__init__.py": '"""x"""' for n in ("search", "helion")},
                      "probes/__init__.py": '"""x"""', **files}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_the_door_rule_bites(tmp_path):
    """The checks above fail on a module that reaches a probe past the door, or a probe that imports the door."""
    root = _tree(tmp_path, {
        "diagnose/analysis/ok.py": "from probes import door\nfrom probes.base import RUN\nfrom probes.door import ask",
        "diagnose/analysis/eager.py": "from probes.search import probe",
        "diagnose/output/named.py": "from probes import helion",
        "diagnose/triage/lazy.py": "def f():\n    import probes.search.facts",
        "diagnose/engine/listed.py": "from probes import door\nMODS = door.modules()",
    })
    assert sorted(behind_the_door(root)) == [
        "diagnose/analysis/eager.py imports probes.search", "diagnose/analysis/eager.py imports probes.search.probe",
        "diagnose/engine/listed.py:2 takes the door's module list", "diagnose/output/named.py imports probes.helion",
        "diagnose/triage/lazy.py imports probes.search.facts"]
    root = _tree(tmp_path / "up", {
        "probes/base.py": "from probes.search import probe",
        "probes/finders.py": "from probes.registry import ORDER",
        "probes/helion/probe.py": "from probes import door",
        "probes/search/find.py": "from probes.registry import ORDER",
        "probes/search/__init__.py": "from probes.search.probe import INFO",
    })
    assert sorted(arrows_back_up(root)) == [
        "probes/base.py imports probes.search", "probes/base.py imports probes.search.probe",
        "probes/helion/probe.py imports probes.door", "probes/search/__init__.py imports probes.search.probe",
        "probes/search/find.py imports probes.registry"]


@pytest.mark.e2e
def test_a_runs_process_that_loads_the_hooks_loads_nothing_of_the_parents():
    """What the worker does (diagnose/runs/worker/plugins.py): import each hook by its name, in a fresh process.
    Nothing of diagnose's and no probe's parent side (probe.py, the door, the registry) comes with them."""
    import subprocess
    import sys

    from probes.door import worker_hooks
    hooks = worker_hooks()
    code = ("import importlib, sys\nfor h in sys.argv[1:]: importlib.import_module(h)\n"
            "print('\\n'.join(m for m in sys.modules if m.split('.')[0] in ('diagnose', 'probes')))")
    loaded = subprocess.run([sys.executable, "-c", code, *hooks], cwd=ROOT, capture_output=True, text=True,
                            timeout=60, check=True).stdout.split()
    assert set(hooks) <= set(loaded) and len(hooks) >= 6, (hooks, loaded)
    parents = [m for m in loaded if m.startswith("diagnose") or m in ("probes.door", "probes.registry", "probes.base",
                                                                        "probes.spec", "probes.finders")
               or m.endswith((".probe", ".find", ".facts", ".report"))]
    assert not parents, parents


# The one owner of the session's conclusions (issue 55): only it sets a verdict; the rest of the engine, the edit
# search and the CLI hand theirs to it.
VERDICT_OWNER = "diagnose/engine/conclusions.py"


def _assigned_attrs(path: Path) -> set[str]:
    """The attribute names a module assigns to (`x.a = ...`, `x.a += ...`, `x.a: T = ...`, in tuples too)."""
    out = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
            n, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            for x in ast.walk(t):
                if isinstance(x, ast.Attribute) and isinstance(x.ctx, ast.Store):
                    out.add(x.attr)
    return out


def test_only_the_owner_of_the_conclusions_sets_a_verdict():
    setters = sorted(str(p.relative_to(ROOT)) for p in CODE if "verdict" in _assigned_attrs(p))
    assert setters == [VERDICT_OWNER], setters
    # the check sees an assignment, a tuple's and an annotated one
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        for code in ("s.verdict = v", "a, s.verdict = 1, v", "s.verdict: int = 1"):
            (Path(d) / "m.py").write_text(code)
            assert "verdict" in _assigned_attrs(Path(d) / "m.py"), code


def map_errors(root: Path, doc: str) -> list[str]:
    """What docs/layout.md's map gets wrong of a tree: each path it names that does not exist, and each folder and
    module of diagnose/ (and each module at probes/' top level) that it leaves out."""
    from tests.layout_map import block, named
    said = named(block(doc))
    there = {p.relative_to(root).with_suffix("").as_posix() if p.suffix else p.relative_to(root).as_posix()
             for p in [*(root / "diagnose").rglob("*.py"), *(root / "probes").glob("*.py")] if p.stem != "__init__"}
    dirs = [root / "diagnose", root / "probes", *(root / "diagnose").rglob("*")]
    there |= {d.relative_to(root).as_posix() for d in dirs if d.is_dir() and any(d.rglob("*.py"))}
    there_paths = {t if (root / t).is_dir() else t + ".py" for t in there}
    return ([f"the map names {p}, which does not exist" for p in sorted(said - there_paths)] +
            [f"the map leaves out {p}" for p in sorted(there_paths - said)])


def test_the_map_is_true():
    from tests.layout_map import block, tree
    doc = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    wrong = map_errors(ROOT, doc)
    assert not wrong, wrong
    assert block(doc) == tree(), "docs/layout.md's map is not what `python -m tests.layout_map` prints"


def test_the_map_rule_bites(tmp_path):
    from tests.layout_map import BEGIN, END
    for rel in ("diagnose/__init__.py", "diagnose/session.py", "diagnose/runs/jail.py", "diagnose/runs/__init__.py",
                "diagnose/tasks/fp8/task.py", "probes/__init__.py", "probes/door.py", "probes/helion/probe.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text('"""x."""')
    doc = (f"{BEGIN}\n```\ndiagnose/                   x.\n  session.py                x.\n"
           "                            a second line of its description.\n  gone.py\n  runs/\n"
           f"    walls.py\nprobes/\n  door.py\n```\n{END}\n")
    assert map_errors(tmp_path, doc) == [
        "the map names diagnose/gone.py, which does not exist",
        "the map names diagnose/runs/walls.py, which does not exist",
        "the map leaves out diagnose/runs/jail.py", "the map leaves out diagnose/tasks",
        "the map leaves out diagnose/tasks/fp8", "the map leaves out diagnose/tasks/fp8/task.py"]


# A triage row is a Row (triage/rows.py), read by attribute: only rows.py, which makes it from its dict, reads a row's
# keys. Elsewhere, in the modules that handle rows (diagnose/triage/ and those importing it), a read by a row's key
# is a read of a row, unless its receiver is one of the other dicts named here (an item, the timing, the walls).
NOT_ROWS = {"i", "item", "timing", "walls", "settings"}


def rows_read_by_key(root: Path) -> list[str]:
    """Each `x["k"]` or `x.get("k")` (pop, setdefault) with k a row's key, in a module that handles rows."""
    from dataclasses import fields

    from diagnose.triage.rows import FIELDS, Row
    keys = set(FIELDS) | {f.name for f in fields(Row)}
    wrong = []
    for p in sorted((root / "diagnose").rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if rel == "diagnose/triage/rows.py" or not (rel.startswith("diagnose/triage/") or any(
                m.startswith("diagnose.triage") for m in _imports(p, submodules=True))):
            continue
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant):
                key, recv = n.slice.value, n.value
            elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args and
                  n.func.attr in ("get", "pop", "setdefault") and isinstance(n.args[0], ast.Constant)):
                key, recv = n.args[0].value, n.func.value
            else:
                continue
            if key in keys and ast.unparse(recv) not in NOT_ROWS:
                wrong.append(f"{rel}:{n.lineno} {ast.unparse(n)}")
    return wrong


def test_a_triage_row_is_read_by_attribute_outside_rows_py():
    wrong = rows_read_by_key(ROOT)
    assert not wrong, wrong


def test_the_row_rule_bites(tmp_path):
    root = _tree(tmp_path, {
        "diagnose/triage/t.py": 'def f(r, rows, item, s):\n    return r["status"], rows[0].get("class"), '
                                'item["key"], s.get("causes"), r.status\n',
        "diagnose/output/o.py": 'from diagnose.triage.rows import Row\n\n\ndef g(row):\n    return row.get("file")\n',
        "diagnose/output/other.py": 'def h(v):\n    return v["status"]\n',       # no row handled here
        "diagnose/triage/rows.py": 'def row_of(row):\n    return row["status"]\n'})
    assert rows_read_by_key(root) == ["diagnose/output/o.py:5 row.get('file')",
                                      "diagnose/triage/t.py:2 r['status']",
                                      "diagnose/triage/t.py:2 rows[0].get('class')"]
