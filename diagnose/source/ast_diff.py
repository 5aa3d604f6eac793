"""The difference between two versions of a submission as edits at the level of statements.

Takes GOOD's and BAD's source; gives the edits that turn one into the other, each of which can be applied
to GOOD alone or with any others. Statements are matched by their AST (positions ignored), so moving
code down a line or reformatting a comment is no edit. A def or class present in both is matched by
name: a change to its decorators or signature is one edit ("header"), and its body is compared
statement by statement in turn. Any other changed statement (a call's arguments, a loop bound, a
module-level assignment, a whole `with` block) is one edit. Pure.
"""
from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Edit:
    id: str              # E1, E2, ... in GOOD's line order
    kind: str            # replace | insert | delete | header
    where: str           # "module" or the qualified name of the def or class it is in
    good: tuple          # (first, last) lines of GOOD it replaces; for an insert, (after, after - 1)
    bad_text: str        # BAD's text that takes their place ("" for a delete)
    good_text: str       # GOOD's text it replaces

    def summary(self) -> str:
        old, new = _first_change(self.good_text, self.bad_text)
        at = f"L{self.good[0]}" if self.kind != "insert" else f"after L{self.good[0] - 1}"
        inside = "" if self.where == "module" else f" in {self.where}"
        what = {"insert": f"+ {new}", "delete": f"- {old}"}.get(self.kind, f"{old} -> {new}")
        return f"{at}{inside}: {what}"


def _short(line: str) -> str:
    return line if len(line) <= 70 else line[:67] + "..."


def _first_change(good: str, bad: str) -> tuple[str, str]:
    """The first line where the two texts differ (a compound statement's changed line, not its header)."""
    g = [x.strip() for x in good.splitlines() if x.strip()]
    b = [x.strip() for x in bad.splitlines() if x.strip()]
    for x, y in zip(g, b, strict=False):
        if x != y:
            return _short(x), _short(y)
    return _short(g[0] if g else ""), _short(b[len(g)] if len(b) > len(g) else (b[0] if b else ""))


def _start(node: ast.stmt) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def _key(node: ast.stmt):
    """How statements are matched: defs and classes by kind and name, anything else by its whole AST."""
    if isinstance(node, DEFS):
        return (type(node).__name__, node.name)
    return ast.dump(node, include_attributes=False)


def _header(node: ast.stmt) -> str:
    clone = ast.copy_location(type(node)(**{f: getattr(node, f) for f in node._fields}), node)
    clone.body = []
    return ast.dump(clone, include_attributes=False)


def _pair_defs(gs: list[ast.stmt], bs: list[ast.stmt]) -> list[tuple[int, int]]:
    """Defs of GOOD and BAD, in order, whose bodies are mostly the same statements: (i, j) pairs."""
    pairs, nxt = [], 0
    for i, g in enumerate(gs):
        if not isinstance(g, DEFS):
            continue
        for j in range(nxt, len(bs)):
            b = bs[j]
            if type(b) is type(g) and difflib.SequenceMatcher(
                    None, [_key(x) for x in g.body], [_key(x) for x in b.body], autojunk=False).ratio() >= 0.6:
                pairs.append((i, j))
                nxt = j + 1
                break
    return pairs


def _text(lines: list[str], first: int, last: int) -> str:
    return "".join(lines[first - 1:last])


class _Differ:
    def __init__(self, good: str, bad: str):
        self.g, self.b = good.splitlines(keepends=True), bad.splitlines(keepends=True)
        self.out: list[tuple] = []

    def block(self, gs: list[ast.stmt], bs: list[ast.stmt], where: str, after: int, b_after: int) -> None:
        sm = difflib.SequenceMatcher(None, [_key(s) for s in gs], [_key(s) for s in bs], autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                for g, b in zip(gs[i1:i2], bs[j1:j2], strict=True):
                    if isinstance(g, DEFS) and ast.dump(g) != ast.dump(b):
                        self.pair_def(g, b, where)
                continue
            before = gs[i1 - 1].end_lineno if i1 > 0 else after
            b_before = bs[j1 - 1].end_lineno if j1 > 0 else b_after
            sub_g, sub_b = gs[i1:i2], bs[j1:j2]
            # a def renamed or reshaped is still the same def: pair it, and diff around it
            done_g = done_b = 0
            for gi, bj in _pair_defs(sub_g, sub_b) + [(len(sub_g), len(sub_b))]:
                self.segment(sub_g[done_g:gi], sub_b[done_b:bj], where,
                             sub_g[done_g - 1].end_lineno if done_g else before,
                             sub_b[done_b - 1].end_lineno if done_b else b_before)
                if gi < len(sub_g):
                    self.pair_def(sub_g[gi], sub_b[bj], where)
                done_g, done_b = gi + 1, bj + 1

    def segment(self, gs: list[ast.stmt], bs: list[ast.stmt], where: str, before: int, b_before: int) -> None:
        """Statements with no counterpart by key: one edit each where they pair off, else one for the run."""
        if not gs and not bs:
            return
        if len(gs) == len(bs):
            for g, b in zip(gs, bs, strict=True):
                if ast.dump(g) != ast.dump(b):
                    self.add("replace", where, (_start(g), g.end_lineno), (_start(b), b.end_lineno))
            return
        if gs and bs:       # align by kind of statement: a changed docstring next to a new import is two edits
            sm = difflib.SequenceMatcher(None, [type(x).__name__ for x in gs], [type(x).__name__ for x in bs],
                                         autojunk=False)
            ops = sm.get_opcodes()
            if len(ops) > 1:
                for _, i1, i2, j1, j2 in ops:
                    self.segment(gs[i1:i2], bs[j1:j2], where, gs[i1 - 1].end_lineno if i1 else before,
                                 bs[j1 - 1].end_lineno if j1 else b_before)
                return
        b_span = (_start(bs[0]), bs[-1].end_lineno) if bs else None
        if not gs:      # with the blank lines and comments that lead up to it in BAD
            self.add("insert", where, (before + 1, before), (b_before + 1, b_span[1]))
        else:
            self.add("delete" if b_span is None else "replace", where, (_start(gs[0]), gs[-1].end_lineno), b_span)

    def pair_def(self, g, b, where: str) -> None:
        name = g.name if where == "module" else f"{where}.{g.name}"
        one_line = g.body[0].lineno == g.lineno or b.body[0].lineno == b.lineno
        if one_line:
            self.add("replace", where, (_start(g), g.end_lineno), (_start(b), b.end_lineno))
            return
        if _header(g) != _header(b):
            self.add("header", where, (_start(g), g.body[0].lineno - 1), (_start(b), b.body[0].lineno - 1))
        self.block(g.body, b.body, name, g.body[0].lineno - 1, b.body[0].lineno - 1)

    def add(self, kind: str, where: str, g_span: tuple, b_span: tuple | None) -> None:
        bad = _text(self.b, *b_span) if b_span else ""
        good = _text(self.g, *g_span) if kind != "insert" else ""
        self.out.append((g_span, kind, where, bad, good))


def edits(good: str, bad: str) -> list[Edit]:
    """The statement-level edits from GOOD to BAD, numbered in GOOD's line order."""
    d = _Differ(good, bad)
    d.block(ast.parse(good).body, ast.parse(bad).body, "module", 0, 0)
    ordered = sorted(d.out, key=lambda e: (e[0][0], e[1] != "insert"))
    return [Edit(f"E{i}", kind, where, span, bad_t, good_t)
            for i, (span, kind, where, bad_t, good_t) in enumerate(ordered, 1)]


def apply(good: str, chosen: list[Edit]) -> str:
    """GOOD with the chosen edits made (any subset: their spans in GOOD never overlap)."""
    lines = good.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    # back to front; at one line, the replace there before the insert in front of it
    # (two inserts at one line: the later edit first, so that the earlier one ends up in front of it)
    for e in sorted(chosen, key=lambda e: (e.good[0], e.kind != "insert", int(e.id[1:])), reverse=True):
        text = e.bad_text if not e.bad_text or e.bad_text.endswith("\n") else e.bad_text + "\n"
        new = text.splitlines(keepends=True)
        if e.kind == "insert":
            lines[e.good[0] - 1:e.good[0] - 1] = new
        else:
            lines[e.good[0] - 1:e.good[1]] = new
    return "".join(lines)


def parses(source: str) -> bool:
    try:
        ast.parse(source)
        return True
    except (SyntaxError, ValueError, RecursionError):
        return False


def _names(text: str) -> tuple[set[str], set[str]]:
    """(names a statement binds at its own level, names it reads), from its text alone."""
    import textwrap
    src = textwrap.dedent(text)
    tree = None
    for attempt in (src, src.rstrip() + "\n    pass\n"):     # a def's header alone has no body
        try:
            tree = ast.parse(attempt)
            break
        except SyntaxError:
            continue
    if tree is None:
        return set(), set()
    bound, read = set(), set()
    for node in tree.body:
        if isinstance(node, DEFS):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            bound.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return bound, read


def requirements(good: str, chosen: list[Edit]) -> dict[str, set[str]]:
    """Edit id -> the edits it cannot run without: those that define a new name it reads, and those that
    replace GOOD's every use of a name it takes away (a rename and its uses). Static and by name only:
    what it misses shows up at run time as a NameError, and that combination is untestable."""
    good_bound = set()
    for node in ast.walk(ast.parse(good)):
        if isinstance(node, DEFS):
            good_bound.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            good_bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            good_bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    facts = {e.id: (_names(e.bad_text), _names(e.good_text)) for e in chosen}
    out = {e.id: set() for e in chosen}
    for e in chosen:
        (b_bound, b_read), (g_bound, _) = facts[e.id]
        for f in chosen:
            if f is e:
                continue
            (fb_bound, _), (_, fg_read) = facts[f.id]
            new_here = (b_read - good_bound) & (fb_bound - good_bound)
            gone = (g_bound - b_bound) & fg_read      # e removes a name f's GOOD text reads: f replaces that use
            if new_here or gone:
                out[e.id].add(f.id)
    return out


def in_order(ids) -> list[str]:
    """Edit ids in GOOD's line order (E2 before E10)."""
    return sorted(ids, key=lambda x: int(x[1:]))


def closure(ids, needs: dict[str, set[str]]) -> list[str]:
    todo, got = list(ids), set()
    while todo:
        i = todo.pop()
        if i not in got:
            got.add(i)
            todo += needs.get(i, ())
    return in_order(got)
