"""Resolve names in a module to dotted torch paths, through whatever aliases the imports set up:
`import torch as T`, `from torch import compile`, `from torch.cuda import graph as g`, ..."""
from __future__ import annotations

import ast


class Aliases:
    def __init__(self, tree: ast.Module):
        self.names: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.names[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.names[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    self.names[a.asname or a.name] = f"{node.module}.{a.name}"

    def qualname(self, node: ast.AST) -> str | None:
        """'torch.cuda.graph' for T.cuda.graph, g, torch.cuda.graph ...; None if not resolvable."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.names.get(node.id)
        if base is None:
            return None
        return ".".join([base] + list(reversed(parts)))
