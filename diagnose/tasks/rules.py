"""The harness's own rules, from the problem's evaluator: the environment variables it sets for the submission
(Helion folders' `os.environ["HELION_DISALLOW_AUTOTUNING"] = "1"`, a DSL's cache switched off). A failure
that such a rule causes is the harness's rule, not a bug in the code: the report names the rule, where the
evaluator sets it, and a fix that obeys it. Parent side: the file is parsed, never run.
"""
from __future__ import annotations

import ast
from pathlib import Path


def _environ(node: ast.AST) -> bool:
    return ast.unparse(node) in ("os.environ", "environ")


def evaluator_rules(path: str | Path) -> list[dict]:
    """Every constant environment setting in the evaluator: [{name, value, file, line}]."""
    p = Path(path)
    try:
        tree = ast.parse(p.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out = []
    for node in ast.walk(tree):
        pair = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript) \
                and _environ(node.targets[0].value):
            pair = (node.targets[0].slice, node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setdefault" \
                and _environ(node.func.value) and len(node.args) == 2:
            pair = (node.args[0], node.args[1])
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.putenv", "putenv") and len(node.args) == 2:
            pair = (node.args[0], node.args[1])
        if pair and all(isinstance(x, ast.Constant) and isinstance(x.value, str) for x in pair):
            out.append({"name": pair[0].value, "value": pair[1].value, "file": p.name, "line": node.lineno})
    return sorted(out, key=lambda r: r["line"])
