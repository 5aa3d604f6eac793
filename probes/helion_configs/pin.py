"""The fixes: the config Helion's search chose at each shape, written where the search no longer runs.

- per shape (`pin_per_shape`): after the kernel's module-level definition, a table of the tuning run's choices
  keyed by the call's shape (key.py's function, the same text the hook ran), and a bind that gives each new
  shape's bound kernel its config before its first call (`set_config`), so Helion has a config and never
  searches. The configs=[...] list stays as it was: a shape the table lacks still searches, and its run shows it.
- one config (`pin_one`): configs=[...] becomes config=<the config most shapes chose>: no search at any shape,
  the chosen config of the other shapes given up (its steady state says what that costs).
"""
from __future__ import annotations

import ast
import json

from diagnose.source.edits import apply_edits
from probes.helion_configs.key import KEY_NAME, KEY_SOURCE

PIN_NAME = "_helion_pin_configs"


def config_text(cfg: dict, cls: str) -> str:
    return f"{cls}({', '.join(f'{k}={v!r}' for k, v in sorted(cfg.items()))})"


def _decorator_call(source: str, kernel: str) -> tuple[ast.FunctionDef | None, ast.Call | None, bool]:
    """The kernel's def, its @helion.kernel(...) call that has configs=, and whether the def is at module level."""
    tree = ast.parse(source)
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == kernel:
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and any(k.arg == "configs" for k in dec.keywords):
                    return node, dec, id(node) in top
    return None, None, False


def module_level(source: str, kernel: str) -> bool:
    return _decorator_call(source, kernel)[2]


def pin_per_shape(source: str, kernel: str, found: str, cls: str) -> str:
    """found: json [[shape key, config], ...] from the tuning run."""
    node, _, top = _decorator_call(source, kernel)
    if node is None or not top:
        raise ValueError(f"{kernel}() with configs=[...] is not defined at module level")
    table = f"_HELION_CONFIGS_{kernel.upper()}"
    rows = "".join(f"    {_key(k)!r}: {config_text(c, cls)},\n" for k, c in json.loads(found))
    block = (f"\n\n# The config Helion's search over {kernel}'s configs=[...] chose at each shape in a tuning run, "
             f"given\n# to each shape's bound kernel before its first call, so it never searches: pinned by diagnose\n"
             f"{table} = {{\n{rows}}}\n")
    if PIN_NAME not in source:      # a second kernel pinned in the same file finds the helpers there already
        block += f"\n\n{KEY_SOURCE}\n\n{_PIN_SOURCE}"
    lines = source.splitlines(keepends=True)
    head, tail = "".join(lines[:node.end_lineno]), "".join(lines[node.end_lineno:])
    tail = tail.lstrip("\n")
    return ((head if head.endswith("\n") else head + "\n") + block + f"\n\n{PIN_NAME}({kernel}, {table})\n"
            + ("\n\n" + tail if tail else ""))


_PIN_SOURCE = f"""def {PIN_NAME}(kernel, table):
    bind, given = kernel.bind, set()

    def pinned(args):
        bound = bind(args)
        config = table.get({KEY_NAME}(args))
        if config is not None and id(bound) not in given:
            given.add(id(bound))
            bound.set_config(config)
        return bound
    kernel.bind = pinned
"""


def _key(k):
    """A key as a literal: lists (from json) back to tuples, as the key function makes them."""
    return tuple(_key(x) for x in k) if isinstance(k, (list, tuple)) else k


def pin_one(source: str, kernel: str, config: str, cls: str) -> str:
    """configs=[...] on the kernel's decorator becomes config=<config>."""
    _, call, _ = _decorator_call(source, kernel)
    if call is None:
        raise ValueError(f"no @helion.kernel(configs=[...]) on {kernel}()")
    kw = next(k for k in call.keywords if k.arg == "configs")
    return apply_edits(source, [([kw.lineno, kw.col_offset, kw.end_lineno, kw.end_col_offset],
                                 f"config={config_text(json.loads(config), cls)}")])
