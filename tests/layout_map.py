"""The module map in docs/layout.md, made from the code itself: every folder and module of diagnose/ and every
module at probes/' top level, each with its docstring's first sentence, in the data flow's order.
`python -m tests.layout_map` prints it; tests/test_structure.py fails when the document's copy differs, names a
path that does not exist, or leaves one out."""
import ast
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Folders in the order the data flows (the rest, and every module, alphabetically after them).
FLOW = ["source", "tasks", "runs", "facts", "analysis", "verdict", "effects", "causes", "audit", "output", "engine",
        "triage", "cli", "runner", "worker"]
COLUMN, WIDTH = 28, 120
BEGIN, END = "<!-- layout: python -m tests.layout_map -->", "<!-- /layout -->"


def _first_sentence(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    para = " ".join(doc.split("\n\n")[0].split())
    return re.split(r"(?<=\.)\s", para, maxsplit=1)[0]


def _entry(name: str, depth: int, text: str) -> list[str]:
    head = "  " * depth + name
    lines = textwrap.wrap(text, WIDTH - COLUMN) or [""]
    out = [(head.ljust(COLUMN) + lines[0]).rstrip() if len(head) < COLUMN else head]
    rest = lines[1:] if len(head) < COLUMN else lines
    return out + [" " * COLUMN + line for line in rest]


def _folder(path: Path, depth: int) -> list[str]:
    init = path / "__init__.py"
    out = _entry(path.name + "/", depth, _first_sentence(init) if init.is_file() else "")
    mods = sorted(p for p in path.glob("*.py") if p.name != "__init__.py")
    subs = sorted((d for d in path.iterdir() if d.is_dir() and any(d.rglob("*.py"))),
                  key=lambda d: (FLOW.index(d.name) if d.name in FLOW else len(FLOW), d.name))
    for p in mods:
        out += _entry(p.name, depth + 1, _first_sentence(p))
    for d in subs:
        out += _folder(d, depth + 1)
    return out


def tree(root: Path = ROOT) -> str:
    """The map: diagnose/ whole, then probes/ with its top-level modules (each probe's package is in the README's
    table, from `diagnose probes`)."""
    out = _folder(root / "diagnose", 0)
    out += _entry("probes/", 0, _first_sentence(root / "probes" / "__init__.py"))
    for p in sorted((root / "probes").glob("*.py")):
        if p.name != "__init__.py":
            out += _entry(p.name, 1, _first_sentence(p))
    return "\n".join(out) + "\n"


def named(text: str) -> set[str]:
    """The paths a map names: each entry line (indented under COLUMN) is one folder or module, at its depth."""
    stack, out = [], set()
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= COLUMN:
            continue
        name, depth = line.split()[0], indent // 2
        stack[depth:] = [name]
        out.add("".join(stack).rstrip("/"))
    return out


def block(doc: str) -> str:
    """The map as docs/layout.md holds it, between its markers (inside a fenced block)."""
    m = re.search(re.escape(BEGIN) + r"\n```\n(.*?)```\n" + re.escape(END), doc, re.S)
    return m.group(1) if m else ""


if __name__ == "__main__":
    print(tree(), end="")
