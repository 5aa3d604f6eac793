"""Locate every suspect's site (file:line) in a submission's source, without executing it.

Presence is decided from what the baseline run did (compile calls, captures, hot loops, where import
time went); this scan locates the places a toggle edits, in whatever style the code is written:

compile      torch.compile as a decorator, a call anywhere (assigned, lazy inside custom_kernel, on a
             module or a bound method), and model.compile(); with mode / fullgraph / dynamic / backend /
             options, resolved through aliases
config       writes to torch._dynamo.config / torch._inductor.config (and .patch calls), with the value
capture      outer CUDA graph captures (`with torch.cuda.graph(...)`, capture_begin,
             make_graphed_callables), and which compiled functions they reach, directly or through
             helpers, methods, closures and nested functions in this file
warmup       loops that repeat kernel work (torch calls, compiled functions, helpers that do either) and
             whose results are thrown away: for-range loops with literal or named counts (constants,
             config dicts, attributes), while loops on a counter or on elapsed time
import_init  work done at import: module-level calls, instances whose __init__ works, comprehensions,
             loops, module-level if blocks that do any of these
autotune     @triton.autotune decorators: the kernel they tune, and the span of their configs
extension    torch.utils.cpp_extension load_inline / load calls: their name and compiler flags

Every site carries the source spans its toggles edit. A source the scan cannot read (too deeply
nested for the parser) yields an empty result with the reason, never an exception.
"""
from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field

from diagnose.scan.aliases import Aliases

COMPILE = "torch.compile"
AUTOTUNE = "triton.autotune"
EXTENSION_LOADS = {"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"}
CAPTURE_CTX = {"torch.cuda.graph", "torch.cuda.graphs.graph"}
GRAPHED = {"torch.cuda.make_graphed_callables", "torch.cuda.graphs.make_graphed_callables"}
CONFIG_PREFIXES = ("torch._dynamo.config", "torch._inductor.config")
COMPILE_KWS = ("mode", "fullgraph", "dynamic", "backend", "options")
TIME_FUNCS = {"time.time", "time.perf_counter", "time.monotonic", "time.perf_counter_ns", "time.time_ns"}
CHEAP_CALLS = {"dict", "list", "set", "tuple", "super", "object", "len", "int", "float", "str", "print",
               "isinstance", "getattr", "setattr", "hasattr", "range", "enumerate", "zip", "min", "max", "sorted",
               "defaultdict", "OrderedDict", "Lock", "RLock"}
SETTINGS_CALLS = ("torch.manual_seed", "torch.set_", "torch.backends", "torch.use_deterministic", "torch._dynamo.config",
                  "torch._inductor.config", "random.seed", "warnings.", "logging.", "os.environ")


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


def _literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return None


class _Functions(ast.NodeVisitor):
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


class Scanner:
    def __init__(self, source: str, tree: ast.Module):
        self.source = source
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
        self.constants = self._constants()

    # -- helpers -----------------------------------------------------------------------------------
    def code(self, line: int) -> str:
        return self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""

    def _constants(self) -> dict[str, object]:
        """Module-level NAME = literal assignments, and class-level ones as 'Cls.NAME'."""
        out = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                parent = self._parents.get(node)
                t = node.targets[0]
                val = _literal(node.value)
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
        lit = _literal(node)
        if lit is not None:
            return lit
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, ast.Attribute):
            return self.constants.get(ast.unparse(node))
        if isinstance(node, ast.Subscript):
            base = self.value_of(node.value)
            key = _literal(node.slice)
            if isinstance(base, dict):
                return base.get(key)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            base = self.value_of(node.func.value)
            if isinstance(base, dict) and node.args:
                return base.get(_literal(node.args[0]), _literal(node.args[1]) if len(node.args) > 1 else None)
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
                val = _literal(kw.value)
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
                    d = {"setting": q, "value": _literal(node.value) if isinstance(node, ast.Assign) else None,
                         "value_span": span(node.value) if isinstance(node, ast.Assign) else None}
                    self.sites.append(Site("config", node.lineno, node.end_lineno, self.code(node.lineno), d))

    # -- capture -----------------------------------------------------------------------------------
    def _direct(self, body: ast.AST) -> list[dict]:
        """Calls to compiled functions written inside a capture block itself."""
        out = []
        for c in ast.walk(body):
            if not isinstance(c, ast.Call):
                continue
            f = c.func
            if isinstance(f, ast.Name) and f.id in self.compiled:
                out.append({"name": f.id, "span": span(f)})
            elif isinstance(f, ast.Attribute) and ast.unparse(f) in self.compiled:
                out.append({"name": ast.unparse(f), "span": span(f)})
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" \
                    and f.attr in self.compiled:
                out.append({"name": f.attr, "span": span(f)})
        return out

    def find_capture(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    ce = item.context_expr
                    if isinstance(ce, ast.Call) and self.alias.qualname(ce.func) in CAPTURE_CTX:
                        fn, cls = self.enclosing(node)
                        body = ast.Module(body=node.body, type_ignores=[])
                        d = {"kind": "graph_context", "function": fn, "with_span": span(node),
                             "item_span": span(ce), "n_items": len(node.items),
                             "body_lines": [node.body[0].lineno, node.body[-1].end_lineno],
                             "graph_arg": ast.unparse(ce.args[0]) if ce.args else None,
                             "assigned": sorted({t.id for s in ast.walk(body) if isinstance(s, ast.Assign)
                                                 for t in s.targets if isinstance(t, ast.Name)}),
                             "calls_compiled": self.reaches_compiled(body, cls), "direct_compiled": self._direct(body)}
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
    def _loop_count(self, node: ast.AST) -> dict | None:
        """How a loop's repetitions are set, and the span a toggle edits: a range() count, a counter bound,
        or an elapsed-time bound. None for a loop over data (not a repetition)."""
        if isinstance(node, (ast.For, ast.AsyncFor)):
            it = node.iter
            if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                    and 1 <= len(it.args) <= 2):
                return None
            stop = it.args[-1]
            count = self.value_of(stop)
            if len(it.args) == 2 and isinstance(count, int):
                start = self.value_of(it.args[0])
                count = count - start if isinstance(start, int) else None
            return {"form": "range", "count": count if isinstance(count, int) else None, "count_span": span(stop),
                    "count_text": ast.unparse(stop), "start_text": ast.unparse(it.args[0]) if len(it.args) == 2 else None,
                    "discards": isinstance(node.target, ast.Name) and (node.target.id.startswith("_") or not any(
                        isinstance(n, ast.Name) and n.id == node.target.id and isinstance(n.ctx, ast.Load)
                        for n in ast.walk(ast.Module(body=node.body, type_ignores=[]))))}
        if isinstance(node, ast.While) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 \
                and isinstance(node.test.ops[0], (ast.Lt, ast.LtE)):
            left, bound = node.test.left, node.test.comparators[0]
            timed = any(isinstance(n, ast.Call) and self.alias.qualname(n.func) in TIME_FUNCS for n in ast.walk(left))
            value = self.value_of(bound)
            return {"form": "time" if timed else "counter", "count": value if isinstance(value, (int, float)) else None,
                    "count_span": span(bound), "count_text": ast.unparse(bound), "start_text": None, "discards": True}
        return None

    def find_warmup(self) -> None:
        captures = self.of("capture")
        self.loops: dict[int, dict] = {}
        for node in ast.walk(self.tree):
            if not isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                continue
            count = self._loop_count(node)
            if count is None:
                continue
            fn, cls = self.enclosing(node)
            body = ast.Module(body=node.body, type_ignores=[])
            work = self.does_kernel_work(body, cls) or self.calls_passed_callable(body, fn)
            self.loops[node.lineno] = {**count, "end_line": node.end_lineno, "kernel_work": work}
            before_capture = any(c.details.get("function") == fn and c.line > node.lineno for c in captures)
            if not (count["discards"] or before_capture) or not work:
                continue
            self.sites.append(Site("warmup", node.lineno, node.end_lineno, self.code(node.lineno), {
                **count, "function": fn, "calls_compiled": self.reaches_compiled(body, cls),
                "before_capture": before_capture}))

    # -- import-time work ----------------------------------------------------------------------------
    def _init_does_work(self, cls_name: str) -> bool:
        init = self.funcs.defs.get(f"{cls_name}.__init__")
        if init is None:
            return False
        calls = self.funcs.callees(init, cls_name) - CHEAP_CALLS
        return any(not c.startswith("super.") for c in calls) or any(
            isinstance(n, (ast.For, ast.While, ast.ListComp, ast.DictComp, ast.SetComp)) for n in ast.walk(init))

    def _statement_work(self, node: ast.AST) -> str | None:
        """What kind of work a module-level statement does at import, or None for a definition or a
        setting (a seed, a flag, a config write)."""
        if isinstance(node, (ast.For, ast.While)):
            return "loop"
        if isinstance(node, ast.If):
            return "if" if any(self._statement_work(n) for n in node.body + node.orelse) else None
        value = node.value if isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign)) else None
        if value is None:
            return None
        calls = [n for n in ast.walk(value) if isinstance(n, ast.Call)]
        comps = [n for n in ast.walk(value) if isinstance(n, (ast.ListComp, ast.DictComp, ast.SetComp,
                                                                ast.GeneratorExp))]
        if comps and calls:
            return "comprehension"
        for c in calls:
            q = self.alias.qualname(c.func) or ""
            name = c.func.id if isinstance(c.func, ast.Name) else None
            if q == COMPILE or q.startswith(SETTINGS_CALLS) or (name and name in CHEAP_CALLS):
                continue
            if name and name in self.funcs.classes and not self._init_does_work(name):
                continue
            if isinstance(c.func, ast.Attribute) and c.func.attr in ("compile", "register", "setdefault", "append",
                                                                       "get", "items", "keys", "values", "join"):
                continue
            return "call"
        return None

    def find_import_work(self) -> None:
        for node in self.tree.body:
            kind = self._statement_work(node)
            if kind is None:
                continue
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound = [t.id for t in targets if isinstance(t, ast.Name)]
            else:
                bound = sorted({t.id for t in ast.walk(node) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)})
            self.sites.append(Site("import_init", node.lineno, node.end_lineno, self.code(node.lineno), {
                "kind": kind, "bound": bound, "calls_compiled": self.reaches_compiled(node, None),
                "uses": sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}),
                "span": span(node)}))

    # -- libraries that spend time for the submission ---------------------------------------------------
    def find_autotune(self) -> None:
        for node in ast.walk(self.tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for dec in node.decorator_list:
                if not (isinstance(dec, ast.Call) and self.alias.qualname(dec.func) == AUTOTUNE):
                    continue
                configs = next((k.value for k in dec.keywords if k.arg == "configs"), dec.args[0] if dec.args else None)
                # how this file spells triton.Config: `triton.Config` after `import triton`, else a bare Config
                prefix = ast.unparse(dec.func.value) + ".Config" if isinstance(dec.func, ast.Attribute) else \
                    next((n for n, q in self.alias.names.items() if q == "triton.Config"), "__import__('triton').Config")
                self.sites.append(Site("autotune", dec.lineno, dec.end_lineno, self.code(dec.lineno), {
                    "kernel": node.name, "configs_span": span(configs) if configs is not None else None,
                    "configs_literal": isinstance(configs, (ast.List, ast.Tuple)), "config_class": prefix}))

    def find_extensions(self) -> None:
        for node in ast.walk(self.tree):
            if not (isinstance(node, ast.Call) and self.alias.qualname(node.func) in EXTENSION_LOADS):
                continue
            kws = {k.arg: k.value for k in node.keywords if k.arg}
            name = _literal(kws["name"]) if "name" in kws else (_literal(node.args[0]) if node.args else None)
            d = {"name": name, "call_span": span(node), "flags": {}, "flag_spans": {}}
            for kw in ("extra_cflags", "extra_cuda_cflags", "verbose"):
                if kw in kws:
                    d["flags"][kw] = _literal(kws[kw])
                    d["flag_spans"][kw] = span(kws[kw])
            self.sites.append(Site("extension", node.lineno, node.end_lineno, self.code(node.lineno), d))

    def of(self, suspect: str) -> list[Site]:
        return [s for s in self.sites if s.suspect == suspect]


def scan_source(source: str, tree: ast.Module | None = None) -> ScanResult:
    try:
        tree = tree or ast.parse(source)
        s = Scanner(source, tree)
        s.find_compile()
        s.find_config()
        s.find_capture()
        s.find_warmup()
        s.find_import_work()
        s.find_autotune()
        s.find_extensions()
    except (RecursionError, MemoryError, SyntaxError, ValueError) as e:
        return ScanResult(sites=[], compiled={}, entry_is_def=False,
                          error=f"could not scan the source ({type(e).__name__}); suspects are decided from the "
                                f"runs alone, and no source toggle is made")
    entry = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "custom_kernel" for n in tree.body)
    s.sites.sort(key=lambda x: (x.line, x.suspect))
    return ScanResult(sites=s.sites, compiled=s.compiled, entry_is_def=entry, loops=s.loops)
