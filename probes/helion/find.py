"""helion's scan finder: @helion.kernel decorators (the kernel, whether config= / configs= is given, the span to
add one, the enclosing factory's parameter that holds a config), and per-shape tables: a module-level dict whose
values are all helion.Config(...) calls, with each key and value span. Sites "helion" and "helion_table"."""
from __future__ import annotations

import ast

from diagnose.source.scan.model import Site, literal, span

HELION_KERNEL = "helion.kernel"
HELION_CONFIG = "helion.Config"


def _config_text(scan) -> str:
    """How this file spells helion.Config (`helion.Config` after `import helion`)."""
    return next((n + ".Config" for n, q in scan.alias.names.items() if q == "helion"),
                next((n for n, q in scan.alias.names.items() if q == HELION_CONFIG), "__import__('helion').Config"))


def _is_config_call(scan, node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and scan.alias.qualname(node.func) in (HELION_CONFIG, "helion.runtime.Config")


def _kernel(scan, node: ast.FunctionDef | ast.AsyncFunctionDef, dec: ast.AST, spelled: str) -> Site:
    call = dec if isinstance(dec, ast.Call) else None
    kws = {k.arg: k.value for k in (call.keywords if call else []) if k.arg}
    outer = scan.parent(node)
    params = [a.arg for a in outer.args.args] if isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
    param = next((a.arg for a in (outer.args.args if params else [])
                  if a.arg in ("config", "cfg") or (a.annotation is not None and
                                                    ast.unparse(a.annotation).endswith("Config"))), None)
    return Site("helion", dec.lineno, dec.end_lineno, scan.code(dec.lineno), {
        "kernel": node.name, "config": "config" in kws, "configs": "configs" in kws,
        "kw_spans": {k: span(v) for k, v in kws.items()}, "call_span": span(call) if call else None,
        "bare_span": None if call else span(dec), "factory": outer.name if params else None,
        "config_param": param, "config_class": spelled})


def find(scan) -> None:
    spelled = _config_text(scan)
    for node in ast.walk(scan.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                if scan.alias.qualname(dec.func if isinstance(dec, ast.Call) else dec) == HELION_KERNEL:
                    scan.add(_kernel(scan, node, dec, spelled))
    for node in scan.tree.body:
        target, value = (node.targets[0], node.value) if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            else (node.target, node.value) if isinstance(node, ast.AnnAssign) else (None, None)
        if not (isinstance(target, ast.Name) and isinstance(value, ast.Dict) and value.values
                and all(_is_config_call(scan, v) for v in value.values) and all(value.keys)):
            continue
        scan.add(Site("helion_table", node.lineno, node.end_lineno, scan.code(node.lineno), {
            "name": target.id, "dict_span": span(value), "config_class": spelled,
            "entries": [{"key": literal(k), "key_span": span(k), "value_span": span(v)}
                        for k, v in zip(value.keys, value.values, strict=True)]}))
