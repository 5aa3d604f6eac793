"""extension_build's scan finder: torch.utils.cpp_extension load_inline / load calls, their name and compiler
flags, with the spans a toggle edits. Site "extension"."""
from __future__ import annotations

import ast

from diagnose.source.scan.model import Site, literal, span

EXTENSION_LOADS = {"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"}


def find(scan) -> None:
    for node in ast.walk(scan.tree):
        if not (isinstance(node, ast.Call) and scan.alias.qualname(node.func) in EXTENSION_LOADS):
            continue
        kws = {k.arg: k.value for k in node.keywords if k.arg}
        name = literal(kws["name"]) if "name" in kws else (literal(node.args[0]) if node.args else None)
        d = {"name": name, "call_span": span(node), "flags": {}, "flag_spans": {}}
        for kw in ("extra_cflags", "extra_cuda_cflags", "verbose"):
            if kw in kws:
                d["flags"][kw] = literal(kws[kw])
                d["flag_spans"][kw] = span(kws[kw])
        scan.add(Site("extension", node.lineno, node.end_lineno, scan.code(node.lineno), d))
