"""Validate a submission before any process starts.

Everything here is static: the file is read and parsed, never executed. A submission must be a readable
UTF-8 Python file that defines a callable `custom_kernel` at module level.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from diagnose.errors import BadInput

ENTRY = "custom_kernel"


@dataclass(frozen=True)
class Submission:
    path: Path
    source: str
    tree: ast.Module

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    @property
    def stem(self) -> str:
        return self.path.stem


def _entry_kind(tree: ast.Module) -> str | None:
    """How the module binds `custom_kernel`: 'def', 'import', 'assign:<node>', or None."""
    kind = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == ENTRY:
            kind = "def"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == ENTRY for a in node.names):
                kind = "import"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == ENTRY for t in targets) and node.value is not None:
                kind = "assign:" + type(node.value).__name__
    return kind


def load_submission(path: str | Path) -> Submission:
    p = Path(path)
    if not p.exists():
        raise BadInput(f"{p}: no such file")
    if p.is_dir():
        raise BadInput(f"{p}: is a directory; give the submission's .py file")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise BadInput(f"{p}: cannot read: {e.strerror}") from None
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{p}: not UTF-8 text (byte {e.start}: {raw[e.start:e.start + 1]!r})") from None
    if not source.strip():
        raise BadInput(f"{p}: the file is empty; it must define {ENTRY}(data)")
    try:
        tree = ast.parse(source, filename=str(p))
    except SyntaxError as e:
        raise BadInput(f"{p}:{e.lineno}: syntax error: {e.msg}") from None
    kind = _entry_kind(tree)
    if kind is None:
        raise BadInput(f"{p}: defines no {ENTRY}; the harness calls {ENTRY}(data)")
    # Literals can never be called; anything else (a lambda, a name, a call) may be.
    if kind.startswith("assign:") and kind[7:] in {"Constant", "List", "Tuple", "Dict", "Set", "JoinedStr"}:
        raise BadInput(f"{p}: {ENTRY} is a {kind[7:].lower()}, not a callable")
    return Submission(path=p.resolve(), source=source, tree=tree)
