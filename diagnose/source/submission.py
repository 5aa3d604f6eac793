"""Validate a submission before any process starts.

Everything here is static: the file is read and parsed, never executed. A submission must be a readable
UTF-8 Python file that binds a callable `custom_kernel` at module level (by Python's own rules: inside
`if`/`try` too, and through globals(), which only the run can settle).
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from diagnose.errors import BadInput, Refused
from diagnose.findings import clip
from diagnose.source.bindings import bindings, binds_dynamically
from diagnose.source.refusals import refusals

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
    """How the module binds `custom_kernel` last: 'def', 'import', 'assign:<node>', 'other', or None."""
    kind = None
    for node in bindings(tree).get(ENTRY, []):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kind = "def"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            kind = "import"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            kind = "assign:" + type(node.value).__name__
        else:
            kind = "other"
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
    refused = refusals(raw)
    if refused:      # KernelBot refuses it before any run: nothing here would say more
        raise Refused(str(p), refused)
    try:
        source = raw.decode("utf-8-sig")     # Python itself accepts a byte order mark
    except UnicodeDecodeError as e:
        raise BadInput(f"{p}: not UTF-8 text (byte {e.start}: {raw[e.start:e.start + 1]!r})") from None
    if not source.strip():
        raise BadInput(f"{p}: the file is empty; it must define {ENTRY}(data)")
    try:
        tree = ast.parse(source, filename=str(p))
        # what parsing alone lets through (a return outside a def); from the text, as python3 compiles it: an AST
        # object goes through a validator whose recursion limit a long one-line sum exceeds
        compile(source, str(p), "exec", dont_inherit=True)
    except SyntaxError as e:
        raise BadInput(f"{p}:{e.lineno}: syntax error: {e.msg}") from None
    except (RecursionError, MemoryError, ValueError) as e:
        raise BadInput(f"{p}: Python cannot compile it: {type(e).__name__}: {clip(str(e), 200)}") from None
    kind = _entry_kind(tree)
    if kind is None and binds_dynamically(tree):
        kind = "dynamic"    # bound through globals() or the like: the run's import will tell
    if kind is None:
        raise BadInput(f"{p}: defines no {ENTRY}; the harness calls {ENTRY}(data)")
    # Literals can never be called; anything else (a lambda, a name, a call) may be.
    if kind.startswith("assign:") and kind[7:] in {"Constant", "List", "Tuple", "Dict", "Set", "JoinedStr"}:
        raise BadInput(f"{p}: {ENTRY} is a {kind[7:].lower()}, not a callable")
    return Submission(path=p.resolve(), source=source, tree=tree)
