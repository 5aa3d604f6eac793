"""What a scan finds: each suspect's site in the source (line span, code, details), the result keyed by
suspect, and the module's functions with who calls whom. Takes a parsed module; gives records, no judgement.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field


def span(node: ast.AST) -> list[int]:
    return [node.lineno, node.col_offset, node.end_lineno, node.end_col_offset]


@dataclass
class Site:
    suspect: str
    line: int
    end_line: int
    code: str
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ScanResult:
    sites: list[Site]
    compiled: dict[str, int]          # compiled function name -> compile-site ordinal
    entry_is_def: bool
    error: str = ""                   # why the source could not be scanned, if it could not
    loops: dict[int, dict] = field(default_factory=dict)   # every counted loop, by header line

    def of(self, suspect: str) -> list[Site]:
        return [s for s in self.sites if s.suspect == suspect]

    def at(self, line: int, suspect: str | None = None) -> list[Site]:
        return [s for s in self.sites if s.line <= line <= s.end_line and (suspect is None or s.suspect == suspect)]

    def to_list(self) -> list[dict]:
        return [s.to_dict() for s in self.sites]


def literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return None


class Functions(ast.NodeVisitor):
    """Table of this file's functions ('f', 'Cls.m', and nested defs under their bare name), which
    names each one calls, and module-level constant assignments (for counts given by name)."""

    def __init__(self, tree: ast.Module):
        self.defs: dict[str, ast.AST] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.cls: list[str] = []
        self.depth = 0
        self.visit(tree)
        self.methods = {n.split(".")[1] for n in self.defs if "." in n}

    def visit_ClassDef(self, node):
        self.classes[node.name] = node
        self.cls.append(node.name)
        self.generic_visit(node)
        self.cls.pop()

    def visit_FunctionDef(self, node):
        key = f"{self.cls[-1]}.{node.name}" if self.cls and self.depth == 0 else node.name
        self.defs.setdefault(key, node)
        self.defs.setdefault(node.name, node)        # a closure or nested helper is called by its bare name
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def callees(self, node: ast.AST, owner: str | None) -> set[str]:
        """Keys this node calls: plain names, self.m() in the same class, Cls() -> Cls.__init__, x.m()."""
        out = set()
        for n in ast.walk(node):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if isinstance(f, ast.Name):
                out.add(f.id)
                if f.id in self.classes:
                    out.add(f"{f.id}.__init__")
            elif isinstance(f, ast.Attribute):
                if isinstance(f.value, ast.Name) and f.value.id == "self" and owner:
                    out.add(f"{owner}.{f.attr}")
                elif f.attr in self.methods:
                    out |= {k for k in self.defs if k.endswith("." + f.attr)}
                if isinstance(f.value, ast.Name):
                    out.add(f"{f.value.id}.{f.attr}")
                out.add(f.attr)
            # functions passed along (map(fn, ...), partial(fn)) are reached too
            for a in n.args:
                if isinstance(a, ast.Name) and a.id in self.defs:
                    out.add(a.id)
        return out
