"""The Scanner's finders for searches that run at run time and whose result can be written into the source:
Helion kernels (and per-shape config tables beside them) and searches written by hand that time candidates
and keep the best in a module-level dict. A mixin, like runtime.py.

helion       @helion.kernel decorators: the kernel, whether config= / configs= is given, the span to add one,
             the enclosing factory's parameter that holds a config; per-shape tables: a module-level dict whose
             values are all helion.Config(...) calls, with each key and value span
search       a function that times candidates in a loop (do_bench, CUDA events, a clock) and stores into a
             module-level dict: the dict's name and the line of its module-level definition
"""
from __future__ import annotations

import ast

from diagnose.source.scan.model import Site, literal, span
from diagnose.source.scan.names import TIME_FUNCS

HELION_KERNEL = "helion.kernel"
HELION_CONFIG = "helion.Config"


class SearchFinders:
    def _helion_config_text(self) -> str:
        """How this file spells helion.Config (`helion.Config` after `import helion`)."""
        return next((n + ".Config" for n, q in self.alias.names.items() if q == "helion"),
                    next((n for n, q in self.alias.names.items() if q == HELION_CONFIG), "__import__('helion').Config"))

    def _is_config_call(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and self.alias.qualname(node.func) in (HELION_CONFIG, "helion.runtime.Config")

    def find_helion(self) -> None:
        spelled = self._helion_config_text()
        for node in ast.walk(self.tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for dec in node.decorator_list:
                call = dec if isinstance(dec, ast.Call) else None
                if self.alias.qualname(call.func if call else dec) != HELION_KERNEL:
                    continue
                kws = {k.arg: k.value for k in (call.keywords if call else []) if k.arg}
                outer = self._parents.get(node)
                params = [a.arg for a in outer.args.args] if isinstance(outer, (ast.FunctionDef,
                                                                                  ast.AsyncFunctionDef)) else []
                param = next((a.arg for a in (outer.args.args if params else [])
                              if a.arg in ("config", "cfg") or (a.annotation is not None and
                                                                ast.unparse(a.annotation).endswith("Config"))), None)
                self.sites.append(Site("helion", dec.lineno, dec.end_lineno, self.code(dec.lineno), {
                    "kernel": node.name, "config": "config" in kws, "configs": "configs" in kws,
                    "kw_spans": {k: span(v) for k, v in kws.items()}, "call_span": span(call) if call else None,
                    "bare_span": None if call else span(dec), "factory": outer.name if params else None,
                    "config_param": param, "config_class": spelled}))
        for node in self.tree.body:
            target, value = (node.targets[0], node.value) if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                else (node.target, node.value) if isinstance(node, ast.AnnAssign) else (None, None)
            if not (isinstance(target, ast.Name) and isinstance(value, ast.Dict) and value.values
                    and all(self._is_config_call(v) for v in value.values) and all(value.keys)):
                continue
            self.sites.append(Site("helion_table", node.lineno, node.end_lineno, self.code(node.lineno), {
                "name": target.id, "dict_span": span(value), "config_class": spelled,
                "entries": [{"key": literal(k), "key_span": span(k), "value_span": span(v)}
                            for k, v in zip(value.keys, value.values, strict=True)]}))

    def _module_dicts(self) -> dict[str, int]:
        """Module-level names bound to an empty dict ({} or dict()): name -> the definition's last line."""
        out = {}
        for node in self.tree.body:
            target, value = (node.targets[0], node.value) if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                else (node.target, node.value) if isinstance(node, ast.AnnAssign) else (None, None)
            empty = (isinstance(value, ast.Dict) and not value.keys) or (
                isinstance(value, ast.Call) and ast.unparse(value.func) in ("dict", "collections.defaultdict",
                                                                             "defaultdict") and not value.keywords)
            if isinstance(target, ast.Name) and empty:
                out[target.id] = node.end_lineno
        return out

    def _times(self, node: ast.AST) -> bool:
        for c in ast.walk(node):
            if isinstance(c, ast.Call):
                q = self.alias.qualname(c.func) or ast.unparse(c.func)
                if q in TIME_FUNCS or q.endswith("do_bench") or q.endswith("cuda.Event") or q.endswith(
                        ".elapsed_time") or (isinstance(c.func, ast.Attribute) and c.func.attr == "elapsed_time"):
                    return True
        return False

    def find_searches(self) -> None:
        dicts = self._module_dicts()
        if not dicts:
            return
        for fn in ast.walk(self.tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            loops = [n for n in ast.walk(fn) if isinstance(n, (ast.For, ast.While)) and self._times(n)]
            if not loops:
                continue
            stores = sorted({t.value.id for n in ast.walk(fn) if isinstance(n, ast.Assign) for t in n.targets
                             if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in dicts})
            for name in stores:
                self.sites.append(Site("search", loops[0].lineno, loops[0].end_lineno, self.code(loops[0].lineno), {
                    "memo": name, "defined_at": dicts[name], "function": fn.name}))
