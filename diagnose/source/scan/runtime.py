"""The Scanner's finders for what the submission does when it runs: graph capture (and what it captures),
warmup loops, work at import, Triton autotuning and extension builds. A mixin: it uses the Scanner's
resolution helpers (code, value_of, enclosing, reaches_compiled, does_kernel_work, of).
"""
from __future__ import annotations

import ast

from diagnose.source.scan.model import Site, literal, span
from diagnose.source.scan.names import (
    AUTOTUNE,
    CAPTURE_CTX,
    CHEAP_CALLS,
    COMPILE,
    EXTENSION_LOADS,
    GRAPHED,
    SETTINGS_CALLS,
    TIME_FUNCS,
)

# a loop written as a comprehension: [work() for _ in range(n)] repeats work as a for statement does
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


class RuntimeFinders:
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
        if isinstance(node, COMPREHENSIONS):     # [work() for _ in range(n)]: one generator, a discarded target
            if len(node.generators) != 1 or node.generators[0].ifs:
                return None
            gen = node.generators[0]
            node = ast.For(target=gen.target, iter=gen.iter, body=[ast.Expr(getattr(node, "elt", None) or node.value)],
                           orelse=[], lineno=node.lineno)
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
                    "count_text": ast.unparse(stop),
                    "start_text": ast.unparse(it.args[0]) if len(it.args) == 2 else None,
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
            if not isinstance(node, (ast.For, ast.AsyncFor, ast.While, *COMPREHENSIONS)):
                continue
            count = self._loop_count(node)
            if count is None:
                continue
            fn, cls = self.enclosing(node)
            body = ast.Module(body=[ast.Expr(getattr(node, "elt", None) or node.value)] if isinstance(
                node, COMPREHENSIONS) else node.body, type_ignores=[])
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
                bound = sorted({t.id for t in ast.walk(node)
                                if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)})
            self.sites.append(Site("import_init", node.lineno, node.end_lineno, self.code(node.lineno), {
                "kind": kind, "bound": bound, "calls_compiled": self.reaches_compiled(node, None),
                "uses": sorted({n.id for n in ast.walk(node)
                                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}),
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
                    next((n for n, q in self.alias.names.items() if q == "triton.Config"),
                         "__import__('triton').Config")
                key = next((k.value for k in dec.keywords if k.arg == "key"),
                           dec.args[1] if len(dec.args) > 1 else None)
                names = literal(key) if key is not None else None
                self.sites.append(Site("autotune", dec.lineno, dec.end_lineno, self.code(dec.lineno), {
                    "kernel": node.name, "configs_span": span(configs) if configs is not None else None,
                    "configs_literal": isinstance(configs, (ast.List, ast.Tuple)), "config_class": prefix,
                    # the arguments a new value of which makes the autotuner tune again, where the list is literal
                    "keys": list(names) if isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names)
                    else None, "key_span": span(key) if key is not None else None,
                    # where cache_results=True goes: its value, or just before the call's closing parenthesis
                    "cache_results_span": next((span(k.value) for k in dec.keywords if k.arg == "cache_results"),
                                               None), "call_end": [dec.end_lineno, dec.end_col_offset - 1]}))

    def find_extensions(self) -> None:
        for node in ast.walk(self.tree):
            if not (isinstance(node, ast.Call) and self.alias.qualname(node.func) in EXTENSION_LOADS):
                continue
            kws = {k.arg: k.value for k in node.keywords if k.arg}
            name = literal(kws["name"]) if "name" in kws else (literal(node.args[0]) if node.args else None)
            d = {"name": name, "call_span": span(node), "flags": {}, "flag_spans": {}}
            for kw in ("extra_cflags", "extra_cuda_cflags", "verbose"):
                if kw in kws:
                    d["flags"][kw] = literal(kws[kw])
                    d["flag_spans"][kw] = span(kws[kw])
            self.sites.append(Site("extension", node.lineno, node.end_lineno, self.code(node.lineno), d))
