"""Locate every suspect's site (file:line) in a submission's source, without executing it.

Presence is decided from what the baseline run did (compile calls, captures, hot loops, where import
time went); this scan locates the places a toggle edits, in whatever style the code is written. The scan
itself finds what every suspect shares:

compile      torch.compile as a decorator, a call anywhere (assigned, lazy inside custom_kernel, on a
             module or a bound method), and model.compile(); with its keywords (COMPILE_KWS), resolved
             through aliases
config       writes to torch._dynamo.config / torch._inductor.config (and .patch calls), with the value

and each probe's own finder (its package's find.py, `find(scan)`, handed in by probes/finders.py) finds
the sites of its suspect with the Scanner's resolution helpers below, and adds them (`add`).

Every site carries the source spans its toggles edit. A source the scan cannot read (too deeply
nested for the parser) yields an empty result with the reason, never an exception.
"""
from __future__ import annotations

import ast

from diagnose.source.scan.aliases import Aliases
from diagnose.source.scan.model import Functions, ScanResult, Site, literal, span
from diagnose.source.scan.names import COMPILE, COMPILE_KWS, CONFIG_PREFIXES


class Scanner:
    def __init__(self, source: str, tree: ast.Module):
        self.source = source
        self.lines = source.splitlines()
        self.tree = tree
        self.alias = Aliases(tree)
        self.funcs = Functions(tree)
        self.sites: list[Site] = []
        self.loops: dict[int, dict] = {}      # every counted loop, by header line (a finder fills it)
        self.compiled: dict[str, int] = {}
        self._parents: dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self._parents[child] = parent
        self.constants = self._constants()

    # -- helpers -----------------------------------------------------------------------------------
    def add(self, site: Site) -> None:
        self.sites.append(site)

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self._parents.get(node)

    def code(self, line: int) -> str:
        return self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""

    def _constants(self) -> dict[str, object]:
        """Module-level NAME = literal assignments, and class-level ones as 'Cls.NAME'."""
        out = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                parent = self._parents.get(node)
                t = node.targets[0]
                val = literal(node.value)
                if val is None:
                    continue
                if isinstance(parent, ast.Module) and isinstance(t, ast.Name):
                    out[t.id] = val
                elif isinstance(parent, ast.ClassDef) and isinstance(t, ast.Name):
                    out[f"{parent.name}.{t.id}"] = val
                    out[f"self.{t.id}"] = val
                elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    out.setdefault(f"self.{t.attr}", val)
        return out

    def value_of(self, node: ast.AST):
        """A count written as a literal, a constant's name, CFG['key'], CFG.get('key', d) or self.attr."""
        lit = literal(node)
        if lit is not None:
            return lit
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, ast.Attribute):
            return self.constants.get(ast.unparse(node))
        if isinstance(node, ast.Subscript):
            base = self.value_of(node.value)
            key = literal(node.slice)
            if isinstance(base, dict):
                return base.get(key)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            base = self.value_of(node.func.value)
            if isinstance(base, dict) and node.args:
                return base.get(literal(node.args[0]), literal(node.args[1]) if len(node.args) > 1 else None)
        return None

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

    def reaches(self, node: ast.AST, owner: str | None, want) -> list[str]:
        """Names this node calls, directly or through helpers, methods and closures defined in this
        file, for which want(name) holds."""
        seen, todo, hits = set(), list(self.funcs.callees(node, owner)), set()
        while todo:
            k = todo.pop()
            if k in seen:
                continue
            seen.add(k)
            if want(k):
                hits.add(k)
            if k in self.funcs.defs:
                todo += self.funcs.callees(self.funcs.defs[k], k.split(".")[0] if "." in k else owner)
        return sorted(hits)

    def reaches_compiled(self, node: ast.AST, owner: str | None) -> list[str]:
        return self.reaches(node, owner, lambda k: k in self.compiled)

    def calls_passed_callable(self, node: ast.AST, fn: str | None) -> bool:
        """Does this code call something it was handed (a parameter of the function around it, or a name
        that function binds to functools.partial(...) or a lambda)? A warmup helper reaches the kernel so:
        `def _warmup(fn, args, iters): for _ in range(iters): fn(*args)`. What it calls is decided at run
        time; the run's samples say whether the loop held the time."""
        fnode = self.funcs.defs.get(fn) if fn else None
        if not isinstance(fnode, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        a = fnode.args
        handed = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs} | {x.arg for x in (a.vararg, a.kwarg) if x}
        for n in ast.walk(fnode):
            if isinstance(n, ast.Assign) and isinstance(n.value, (ast.Lambda, ast.Call)) and (
                    isinstance(n.value, ast.Lambda) or (self.alias.qualname(n.value.func) or "").endswith("partial")):
                handed |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in handed
                   for c in ast.walk(node))

    def does_kernel_work(self, node: ast.AST, owner: str | None) -> bool:
        """Does this code call torch (or a compiled function, or a helper that does)?"""
        def torch_call(n):
            return isinstance(n, ast.Call) and (self.alias.qualname(n.func) or "").startswith("torch.")
        if any(torch_call(n) for n in ast.walk(node)) or self.reaches_compiled(node, owner):
            return True
        return bool(self.reaches(node, owner, lambda k: k in self.funcs.defs and any(
            torch_call(n) for n in ast.walk(self.funcs.defs[k]))))

    # -- compile -----------------------------------------------------------------------------------
    def _kws(self, call: ast.Call | None, d: dict) -> None:
        d["kw"], d["kw_spans"] = {}, {}
        if call is None:
            return
        for kw in call.keywords:
            if kw.arg in COMPILE_KWS:
                val = literal(kw.value)
                d["kw"][kw.arg] = val if val is not None or isinstance(kw.value, ast.Constant) else \
                    ast.get_source_segment(self.source, kw.value)
                d["kw_spans"][kw.arg] = span(kw.value)

    def _compile_details(self, call: ast.Call | None, kind: str, target: str | None, wrapped: str | None,
                         node: ast.AST) -> dict:
        d = {"kind": kind, "target": target, "wrapped": wrapped, "span": span(node), "bare": call is None}
        if call is not None:
            d["call_span"] = span(call)
        self._kws(call, d)
        opts = d["kw"].get("options") if isinstance(d["kw"].get("options"), dict) else {}
        d["options"] = opts
        mode = d["kw"].get("mode") or "default"
        # options that amount to a mode: max_autotune, and CUDA graphs (what reduce-overhead adds)
        d["records_graphs"] = mode in ("reduce-overhead", "max-autotune") or bool(opts.get("triton.cudagraphs"))
        d["autotunes"] = "max-autotune" in mode or bool(opts.get("max_autotune"))
        d["mode"] = mode
        d["fullgraph"] = d["kw"].get("fullgraph", False)
        return d

    def find_compile(self) -> None:
        decorators = set()
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for dec in node.decorator_list:
                    call = dec if isinstance(dec, ast.Call) else None
                    if self.alias.qualname(call.func if call else dec) == COMPILE:
                        decorators.add(id(dec))
                        owner, _ = self.enclosing(node)
                        name = node.name if not owner else f"{owner.split('.')[0]}.{node.name}"
                        self._add_compile(self._compile_details(call, "decorator", name, None, dec), dec)
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Call) or id(node) in decorators:
                continue
            q = self.alias.qualname(node.func)
            parent = self._parents.get(node)
            if isinstance(node.func, ast.Call) and self.alias.qualname(node.func.func) == COMPILE \
                    and not node.func.args and node.args:
                # torch.compile(mode=..., dynamic=False)(fn): the options on the inner call, the target outside
                decorators.add(id(node.func))
                target = None
                if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
                    target = ast.unparse(parent.targets[0])
                d = self._compile_details(node.func, "call", target, ast.unparse(node.args[0]), node)
                d["arg_span"], d["expr_span"] = span(node.args[0]), span(node)
                self._add_compile(d, parent if isinstance(parent, ast.Assign) else node)
            elif q == COMPILE and node.args and id(node) not in decorators:
                target = None
                if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
                    target = ast.unparse(parent.targets[0])
                d = self._compile_details(node, "call", target, ast.unparse(node.args[0]), node)
                d["arg_span"] = span(node.args[0])
                self._add_compile(d, parent if isinstance(parent, ast.Assign) else node)
            elif (isinstance(node.func, ast.Attribute) and node.func.attr == "compile" and q is None
                  and (set(k.arg for k in node.keywords) & set(COMPILE_KWS) or not node.args)
                  and isinstance(parent, ast.Expr)):
                # model.compile(...): nn.Module's own compile (re.compile and friends resolve to a module)
                d = self._compile_details(node, "module_method", ast.unparse(node.func.value), None, node)
                d["stmt_span"] = span(parent)
                self._add_compile(d, parent)

    def _add_compile(self, d: dict, node: ast.AST) -> None:
        d["ordinal"] = len([s for s in self.sites if s.suspect == "compile"])
        target = d.get("target") or d.get("wrapped")
        if target:
            self.compiled[target] = d["ordinal"]
            # self.f = torch.compile(...) is called as self.f(); index the bare name as well
            if "." in target:
                self.compiled.setdefault(target.split(".")[-1], d["ordinal"])
        if d.get("wrapped") and d.get("target"):
            self.compiled.setdefault(d["wrapped"].split(".")[-1], d["ordinal"])
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
                    d = {"setting": q, "value": literal(node.value) if isinstance(node, ast.Assign) else None,
                         "value_span": span(node.value) if isinstance(node, ast.Assign) else None}
                    self.sites.append(Site("config", node.lineno, node.end_lineno, self.code(node.lineno), d))

    def of(self, suspect: str) -> list[Site]:
        return [s for s in self.sites if s.suspect == suspect]


def scan_source(source: str, tree: ast.Module | None = None, *, finders) -> ScanResult:
    """The compile and config sites, then what each of `finders` adds: the probes' `find(scan)`, in the registry's
    order (a finder may read the sites one before it found). Always named, so that no caller gets a scan short of
    the probes' sites unawares: probes/finders.py hands in every probe's, `finders=()` asks for the scan's own."""
    try:
        tree = tree or ast.parse(source)
        s = Scanner(source, tree)
        s.find_compile()
        s.find_config()
        for find in finders:
            find(s)
    except (RecursionError, MemoryError, SyntaxError, ValueError) as e:
        return ScanResult(sites=[], compiled={}, entry_is_def=False,
                          error=f"could not scan the source ({type(e).__name__}); suspects are decided from the "
                                f"runs alone, and no source toggle is made")
    entry = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "custom_kernel" for n in tree.body)
    s.sites.sort(key=lambda x: (x.line, x.suspect))
    return ScanResult(sites=s.sites, compiled=s.compiled, entry_is_def=entry, loops=s.loops)
