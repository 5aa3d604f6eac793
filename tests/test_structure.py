"""The code's shape, checked: modules stay small enough to read alone, and the parent's runner and the
child's worker talk only through protocol.py (neither imports the other)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = sorted(p for d in ("diagnose", "probes") for p in (ROOT / d).rglob("*.py"))
MAX_LINES = 300


def _imports(path: Path) -> set[str]:
    out = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.ImportFrom) and n.module:
            out.add(n.module)
        elif isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
    return out


def test_no_module_is_over_300_lines():
    long = {str(p.relative_to(ROOT)): n for p in CODE if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def test_worker_and_runner_never_import_each_other():
    crossing = []
    for side, other in (("worker", "runner"), ("runner", "worker")):
        for p in (ROOT / "diagnose" / side).rglob("*.py"):
            crossing += [f"{p.relative_to(ROOT)} imports {m}" for m in _imports(p)
                         if m == f"diagnose.{other}" or m.startswith(f"diagnose.{other}.")]
    assert not crossing, crossing


def test_the_check_sees_what_it_checks():
    # the lists above are not empty by accident: both sides exist and import the protocol
    assert len(CODE) > 40
    assert "diagnose.protocol" in _imports(ROOT / "diagnose" / "worker" / "main.py")
    assert "diagnose.protocol" in _imports(ROOT / "diagnose" / "runner" / "stages.py")
