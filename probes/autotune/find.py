"""autotune's scan finder: @triton.autotune decorators, the kernel they tune, the span of their configs, the
key arguments, and where cache_results=True would go. Site "autotune"."""
from __future__ import annotations

import ast

from diagnose.source.scan.model import Site, literal, span

AUTOTUNE = "triton.autotune"


def _site(scan, node: ast.FunctionDef | ast.AsyncFunctionDef, dec: ast.Call) -> Site:
    configs = next((k.value for k in dec.keywords if k.arg == "configs"), dec.args[0] if dec.args else None)
    # how this file spells triton.Config: `triton.Config` after `import triton`, else a bare Config
    prefix = ast.unparse(dec.func.value) + ".Config" if isinstance(dec.func, ast.Attribute) else \
        next((n for n, q in scan.alias.names.items() if q == "triton.Config"), "__import__('triton').Config")
    key = next((k.value for k in dec.keywords if k.arg == "key"), dec.args[1] if len(dec.args) > 1 else None)
    names = literal(key) if key is not None else None
    return Site("autotune", dec.lineno, dec.end_lineno, scan.code(dec.lineno), {
        "kernel": node.name, "configs_span": span(configs) if configs is not None else None,
        "configs_literal": isinstance(configs, (ast.List, ast.Tuple)), "config_class": prefix,
        # the arguments a new value of which makes the autotuner tune again, where the list is literal
        "keys": list(names) if isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names)
        else None, "key_span": span(key) if key is not None else None,
        # where cache_results=True goes: its value, or just before the call's closing parenthesis
        "cache_results_span": next((span(k.value) for k in dec.keywords if k.arg == "cache_results"), None),
        "call_end": [dec.end_lineno, dec.end_col_offset - 1]})


def find(scan) -> None:
    for node in ast.walk(scan.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and scan.alias.qualname(dec.func) == AUTOTUNE:
                    scan.add(_site(scan, node, dec))
