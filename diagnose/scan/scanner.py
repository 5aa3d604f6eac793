"""Find the five suspects' sites in a submission's source, with file:line and the evidence.

compile      torch.compile calls and decorators, with mode / fullgraph / dynamic / backend / options
config       assignments to torch._dynamo.config / torch._inductor.config (and .patch calls)
capture      outer CUDA graph captures: `with torch.cuda.graph(...)`, capture_begin, make_graphed_callables,
             and which compiled functions they reach, directly or through helpers in this file
warmup       `for _ in range(N)` loops that run compiled or captured work, or precede a capture
import_init  work done at import: module-level calls, instantiations whose __init__ does work, loops

A decorated torch.compile is cheap at import (it compiles on first call); warming it up at import is not.
"""
from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field

from diagnose.scan.aliases import Aliases

COMPILE = "torch.compile"
CAPTURE_CTX = {"torch.cuda.graph", "torch.cuda.graphs.graph"}
GRAPHED = {"torch.cuda.make_graphed_callables", "torch.cuda.graphs.make_graphed_callables"}
CONFIG_PREFIXES = ("torch._dynamo.config", "torch._inductor.config")
COMPILE_KWS = ("mode", "fullgraph", "dynamic", "backend", "options")


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

    def of(self, suspect: str) -> list[Site]:
        return [s for s in self.sites if s.suspect == suspect]

    def to_list(self) -> list[dict]:
        return [s.to_dict() for s in self.sites]


def _literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


class _Functions(ast.NodeVisitor):
    """Table of this file's functions ('f', 'Cls.m') and the names each one calls."""

    def __init__(self, tree: ast.Module):
        self.defs: dict[str, ast.AST] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.cls: list[str] = []
        self.visit(tree)
        self.methods = {n.split(".")[1] for n in self.defs if "." in n}

    def visit_ClassDef(self, node):
        self.classes[node.name] = node
        self.cls.append(node.name)
        self.generic_visit(node)
        self.cls.pop()

    def visit_FunctionDef(self, node):
        key = f"{self.cls[-1]}.{node.name}" if self.cls else node.name
        self.defs.setdefault(key, node)
        self.generic_visit(node)

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
        return out


class Scanner:
    def __init__(self, source: str, tree: ast.Module):
        self.lines = source.splitlines()
        self.tree = tree
        self.alias = Aliases(tree)
        self.funcs = _Functions(tree)
        self.sites: list[Site] = []
        self.compiled: dict[str, int] = {}
        self._parents: dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self._parents[child] = parent

    # -- helpers -----------------------------------------------------------------------------------
    def code(self, line: int) -> str:
        return self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""

    def enclosing(self, node: ast.AST) -> tuple[str | None, str | None]:
        """(function key, class name) of the innermost def around node."""
        n, fn, cls = node, None, None
        while n in self._parents:
            n = self._parents[n]
            if fn is None and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                fn = n.name
            elif isinstance(n, ast.ClassDef):
                cls = n.name
                break
        if fn and cls:
            return f"{cls}.{fn}", cls
        return fn, cls

    def reaches_compiled(self, node: ast.AST, owner: str | None) -> list[str]:
        """Compiled functions this node calls, directly or through helpers defined in this file."""
        seen, todo, hits = set(), list(self.funcs.callees(node, owner)), set()
        while todo:
            k = todo.pop()
            if k in seen:
                continue
            seen.add(k)
            if k in self.compiled:
                hits.add(k)
            if k in self.funcs.defs:
                todo += self.funcs.callees(self.funcs.defs[k], k.split(".")[0] if "." in k else owner)
        return sorted(hits)

    # -- compile -----------------------------------------------------------------------------------
    def _compile_details(self, call: ast.Call | None, kind: str, target: str, wrapped: str | None,
                         node: ast.AST) -> dict:
        d = {"kind": kind, "target": target, "wrapped": wrapped, "span": span(node), "bare": call is None,
             "kw": {}, "kw_spans": {}}
        if call is not None:
            d["call_span"] = span(call)
            for kw in call.keywords:
                if kw.arg in COMPILE_KWS:
                    val = _literal(kw.value)
                    d["kw"][kw.arg] = val if val is not None or isinstance(kw.value, ast.Constant) else \
                        ast.get_source_segment("\n".join(self.lines), kw.value)
                    d["kw_spans"][kw.arg] = span(kw.value)
        d["mode"] = d["kw"].get("mode") or "default"
        d["fullgraph"] = d["kw"].get("fullgraph", False)
        return d

    def find_compile(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for dec in node.decorator_list:
                    call = dec if isinstance(dec, ast.Call) else None
                    if self.alias.qualname(call.func if call else dec) == COMPILE:
                        owner, _ = self.enclosing(node)
                        name = node.name if not owner else f"{owner.split('.')[0]}.{node.name}"
                        self._add_compile(self._compile_details(call, "decorator", name, None, dec), dec)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                call = node.value
                if self.alias.qualname(call.func) == COMPILE and len(node.targets) == 1:
                    t = node.targets[0]
                    target = t.id if isinstance(t, ast.Name) else ast.unparse(t)
                    wrapped = ast.unparse(call.args[0]) if call.args else None
                    d = self._compile_details(call, "call", target, wrapped, call)
                    d["arg_span"] = span(call.args[0]) if call.args else None
                    self._add_compile(d, node)

    def _add_compile(self, d: dict, node: ast.AST) -> None:
        d["ordinal"] = len(self.compiled)
        self.compiled[d["target"]] = d["ordinal"]
        # a method compiled as self.f is called as self.f(): index it under its bare name as well
        if "." in d["target"]:
            self.compiled.setdefault(d["target"].split(".")[-1], d["ordinal"])
        self.sites.append(Site("compile", node.lineno, node.end_lineno, self.code(node.lineno), d))

    def find_config(self) -> None:
        for node in ast.walk(self.tree):
            targets = []
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "patch":
                targets = [node.func.value]
            for t in targets:
                q = self.alias.qualname(t)
                if q and q.startswith(CONFIG_PREFIXES):
                    self.sites.append(Site("config", node.lineno, node.end_lineno, self.code(node.lineno),
                                           {"setting": q}))

    # -- capture -----------------------------------------------------------------------------------
    def find_capture(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    ce = item.context_expr
                    if isinstance(ce, ast.Call) and self.alias.qualname(ce.func) in CAPTURE_CTX:
                        fn, cls = self.enclosing(node)
                        body = ast.Module(body=node.body, type_ignores=[])
                        direct = [{"name": c.func.id, "span": span(c.func)} for c in ast.walk(body)
                                  if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                                  and c.func.id in self.compiled]
                        direct += [{"name": c.func.attr, "span": span(c.func)} for c in ast.walk(body)
                                   if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                                   and isinstance(c.func.value, ast.Name) and c.func.value.id == "self"
                                   and c.func.attr in self.compiled]
                        d = {"kind": "graph_context", "function": fn, "with_span": span(node),
                             "item_span": span(ce), "n_items": len(node.items),
                             "body_lines": [node.body[0].lineno, node.body[-1].end_lineno],
                             "graph_arg": ast.unparse(ce.args[0]) if ce.args else None,
                             "assigned": sorted({t.id for s in ast.walk(body) if isinstance(s, ast.Assign)
                                                 for t in s.targets if isinstance(t, ast.Name)}),
                             "calls_compiled": self.reaches_compiled(body, cls), "direct_compiled": direct}
                        self.sites.append(Site("capture", node.lineno, node.end_lineno, self.code(node.lineno), d))
            elif isinstance(node, ast.Call):
                q = self.alias.qualname(node.func)
                fn, cls = self.enclosing(node)
                if q in GRAPHED:
                    d = {"kind": "make_graphed_callables", "function": fn, "span": span(node),
                         "calls_compiled": [a.id for a in node.args[:1] if isinstance(a, ast.Name)
                                            and a.id in self.compiled]}
                    self.sites.append(Site("capture", node.lineno, node.end_lineno, self.code(node.lineno), d))
                elif isinstance(node.func, ast.Attribute) and node.func.attr == "capture_begin":
                    scope = self.funcs.defs.get(fn) if fn else None
                    d = {"kind": "capture_begin", "function": fn,
                         "calls_compiled": self.reaches_compiled(scope, cls) if scope else []}
                    self.sites.append(Site("capture", node.lineno, node.end_lineno, self.code(node.lineno), d))

    # -- warmup loops --------------------------------------------------------------------------------
    def find_warmup(self) -> None:
        captures = self.of("capture")
        for node in ast.walk(self.tree):
            if not (isinstance(node, ast.For) and isinstance(node.iter, ast.Call)
                    and isinstance(node.iter.func, ast.Name) and node.iter.func.id == "range"
                    and len(node.iter.args) == 1):
                continue
            count = _literal(node.iter.args[0])
            if not isinstance(count, int):
                continue
            fn, cls = self.enclosing(node)
            body = ast.Module(body=node.body, type_ignores=[])
            compiled = self.reaches_compiled(body, cls)
            before_capture = any(c.details.get("function") == fn and c.line > node.lineno for c in captures)
            if not compiled and not before_capture:
                continue
            self.sites.append(Site("warmup", node.lineno, node.end_lineno, self.code(node.lineno), {
                "count": count, "count_span": span(node.iter.args[0]), "function": fn,
                "calls_compiled": compiled, "before_capture": before_capture}))

    # -- import-time work ----------------------------------------------------------------------------
    def _init_does_work(self, cls_name: str) -> bool:
        init = self.funcs.defs.get(f"{cls_name}.__init__")
        if init is None:
            return False
        cheap = {"dict", "list", "set", "tuple", "super", "object", "len", "int", "float", "str"}
        calls = self.funcs.callees(init, cls_name) - cheap
        return any(not c.startswith("super.") for c in calls)

    def find_import_work(self) -> None:
        for node in self.tree.body:
            kind, calls, bound = None, [], []
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                q = self.alias.qualname(node.value.func) or ""
                if q.startswith("torch.") and not q.startswith("torch.compile"):
                    continue  # torch.manual_seed, torch.set_float32_matmul_precision: settings, not work
                if isinstance(node.value.func, ast.Name) and node.value.func.id in ("print",):
                    continue
                kind, calls = "call", [ast.unparse(node.value.func)]
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                f = node.value.func
                if self.alias.qualname(f) == COMPILE:
                    continue  # compiling is lazy: the cost is paid at the first call
                name = f.id if isinstance(f, ast.Name) else None
                if name and (name in self.funcs.defs or (name in self.funcs.classes and self._init_does_work(name))):
                    kind, calls = "assign", [name]
                    bound = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, (ast.For, ast.While)):
                kind = "loop"
                bound = sorted({t.id for t in ast.walk(node) if isinstance(t, ast.Name)
                                and isinstance(t.ctx, ast.Store)})
            if kind is None:
                continue
            body = node if kind != "assign" else node.value
            compiled = self.reaches_compiled(body, None)
            self.sites.append(Site("import_init", node.lineno, node.end_lineno, self.code(node.lineno), {
                "kind": kind, "calls": calls, "bound": bound, "calls_compiled": compiled,
                "span": span(node)}))

    def of(self, suspect: str) -> list[Site]:
        return [s for s in self.sites if s.suspect == suspect]


def scan_source(source: str, tree: ast.Module | None = None) -> ScanResult:
    tree = tree or ast.parse(source)
    s = Scanner(source, tree)
    s.find_compile()
    s.find_config()
    s.find_capture()
    s.find_warmup()
    s.find_import_work()
    entry = any(isinstance(n, ast.FunctionDef) and n.name == "custom_kernel" for n in tree.body)
    s.sites.sort(key=lambda x: (x.line, x.suspect))
    return ScanResult(sites=s.sites, compiled=s.compiled, entry_is_def=entry)
