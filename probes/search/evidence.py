"""What the search probe reads from runs: its hook's records (hook.py) in each stage's probe_facts["search"]."""
from __future__ import annotations

import ast

from diagnose.session import Run

NAME = "search"


def _facts(run: Run | None):
    for st in (run.stages if run is not None else []):
        for e in st.probe_facts.get(NAME, []):
            yield st, e


def searches(run: Run | None, source: str = "") -> list[dict]:
    """Every search the run's first calls (or tuning phases) made, one per phase and search frame; a phase the
    deadline cut off keeps what its hook sent as the search crossed the threshold."""
    out, ended = [], set()
    for st, e in _facts(run):
        if e.get("what") == "phase":
            ended.add((st.name, e["phase"]))
            out += [{**s, "phase": e["phase"], "stage": st.name, "changed": e.get("changed") or [], "open": False}
                    for s in e.get("searches") or []]
    for st, e in _facts(run):
        if e.get("what") == "searching" and (st.name, e["phase"]) not in ended:
            out.append({**e["search"], "phase": e["phase"], "stage": st.name, "changed": [], "open": True})
    for r in out:
        r["span"] = loop_span(source, r.get("def_line"), r.get("lines") or [r.get("line")]) if source else \
            sorted(set(r.get("lines") or []))
    return out


def loop_span(source: str, def_line: int | None, lines: list[int]) -> list[int]:
    """The lines of the innermost loop (or, for a min(...) or a comprehension over candidates, the statement)
    that holds every clock read of the search, inside the function it ran in."""
    lines = [ln for ln in lines if isinstance(ln, int)]
    try:
        tree = ast.parse(source)
    except (SyntaxError, RecursionError, ValueError):
        return lines
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
               and n.lineno == def_line), None)
    scope = fn or tree

    def holds(n):
        return all(n.lineno <= ln <= (n.end_lineno or n.lineno) for ln in lines)
    loops = [n for n in ast.walk(scope) if isinstance(n, (ast.For, ast.While, ast.ListComp, ast.SetComp,
             ast.DictComp, ast.GeneratorExp)) and holds(n)]
    stmts = [n for n in ast.walk(scope) if isinstance(n, ast.stmt) and holds(n) and n is not fn]
    best = min(loops or stmts, key=lambda n: (n.end_lineno or n.lineno) - n.lineno, default=None)
    if fn is not None and isinstance(fn, ast.Lambda):      # a lambda's frame: the statement that holds it
        best = min((n for n in ast.walk(tree) if isinstance(n, ast.stmt) and holds(n)),
                   key=lambda n: (n.end_lineno or n.lineno) - n.lineno, default=best)
    return list(range(best.lineno, (best.end_lineno or best.lineno) + 1)) if best is not None else lines


def _where(r: dict) -> str:
    """`_pick() L38 (from custom_kernel() L44)`; a comprehension's or a lambda's frame is named by the function
    that holds it."""
    path = list(r.get("path") or [])
    func, line = r["func"], r["span"][0] if r.get("span") else r["line"]
    while func.startswith("<") and path:
        func = f"{path[-1]['func']}()'s {func.strip('<>')}"
        path.pop()
    head = func if func.endswith(")") or "'s " in func else f"{func}()"
    shown = " → ".join(f"{p['func']}() L{p['line']}" for p in path)
    return f"{head} L{line}" + (f" (from {shown})" if shown else "")


def story(ran: list[dict], source: str) -> str:
    """One sentence per search frame: where it runs, what it timed, its whole cost, and where its choice went."""
    groups: dict[tuple, list[dict]] = {}
    for r in ran:
        groups.setdefault((r["func"], r.get("def_line")), []).append(r)
    out = []
    for recs in groups.values():
        kept = sorted(choices([r["changed"] for r in recs]))
        cut = sum(1 for r in recs if r["open"])
        out.append(f"the search in {_where(recs[0])} timed {sum(r['candidates'] for r in recs)} candidates "
                   f"({', '.join(sorted({c for r in recs for c in r.get('clocks') or []}))}) in {len(recs)} first "
                   f"call(s), {sum(r['seconds'] for r in recs):.1f} s in all" + (f", {cut} cut off" if cut else "") +
                   (f"; its choice went to `{'`, `'.join(kept)}`" if kept else ""))
    return "; ".join(out)


def choices(phases: list[list[dict]]) -> set[str]:
    """Of what each phase with a search changed, the places that hold its choice: those changed at every shape
    the search ran for (what changed once, an input parked on the first call, is not the choice); where a dict or
    a cache holds it, not a bare attribute bound beside it; and where some hold plain values, not those holding
    tensors or objects."""
    counts, kinds, plain, linked = {}, {}, {}, {}
    for changed in phases:
        for c in changed:
            counts[c["path"]] = counts.get(c["path"], 0) + 1
            kinds[c["path"]] = c["kind"]
            plain[c["path"]] = plain.get(c["path"], True) and c.get("plain", True)
            linked[c["path"]] = linked.get(c["path"], False) or c.get("linked", c["kind"] == "cache")
    if any(linked.values()):     # a value the searches held while timing: their choice, not a counter beside them
        counts = {p: n for p, n in counts.items() if linked[p]}
    elif any("linked" in c for changed in phases for c in changed):
        return set()             # the hook judged every place, and none holds what the searches timed
    if any(k in ("dict", "mapping", "cache", "list") for k in kinds.values()):
        counts = {p: n for p, n in counts.items() if kinds[p] != "attr"}
    if any(plain[p] for p in counts):       # values a literal holds are choices; tensors parked beside them are not
        counts = {p: n for p, n in counts.items() if plain[p]}
    return {p for p, n in counts.items() if n == max(counts.values())}


def tuned_choices(tuning: Run) -> set[str]:
    """Where the tuning run's searches left their choice: it ran every shape to its end, so it shows this even
    where the deadline cut off the baseline's first call before its phase could report what it changed."""
    return choices([e.get("changed") or [] for _, e in _facts(tuning) if e.get("what") == "phase"
                    and e.get("searches")])


def scanned_dicts(tuning: Run) -> list[dict]:
    """What each dict the scan found a search keeping its result in held at the tuning run's end, as the hook sent it
    (it reads those the plan named: hook_args) or a schema-4 session kept it (StageResult.memo, lifted as the
    event "memo"): [{name, text, entries, bytes, error}]."""
    return [e for _, e in _facts(tuning) if "memo" in (e.get("what"), e.get("event"))]


def kept_places(tuning: Run, ran: list[dict], scanned: list[str]) -> tuple[list[dict], list[str]]:
    """The places to pin, from the tuning run: those a phase with a search changed (the scan's dicts too), with
    the text of what they held at its end; and why any cannot be pinned."""
    linked = set(scanned) | tuned_choices(tuning)
    kept = {e["path"]: e for _, e in _facts(tuning) if e.get("what") == "kept"}
    for m in scanned_dicts(tuning):      # what the scan's dicts held, where no phase's change named them
        kept.setdefault(m["name"], {"path": m["name"], "kind": "dict", "text": m.get("text"),
                                    "entries": m.get("entries"), "error": m.get("error")})
    places, refused = [], []
    for path in sorted(linked):
        k = kept.get(path)
        if k is None:
            refused.append(f"`{path}`: the tuning run {tuning.id} did not end (it reported no contents)")
        elif not k.get("text"):
            refused.append(f"`{path}`: {k.get('error') or 'no text'}")
        elif k.get("entries") == 0:
            refused.append(f"`{path}` was empty after the tuning run {tuning.id}: the search stored nothing")
        else:
            places.append(k)
    if not linked and ran:
        refused.append(unpinned(tuning))
    return places, refused


NO_PLACE = ("no place of the module took a value the searches timed (what they chose is kept in a local, or in an "
            "object the module does not hold)")
NO_RETURN = "no function of theirs returned it"


def linked_returns(tuning: Run | None) -> list[dict]:
    """What search functions returned in the tuning run that was a value their searches held while timing."""
    return [r for _, e in _facts(tuning) if e.get("what") == "phase" and e.get("searches")
            for r in e.get("returned") or [] if r.get("linked")]


def linked_places(tuning: Run | None) -> list[str]:
    """The module's places that took a value the searches held while timing, in the tuning run's phases."""
    return sorted({c["path"] for _, e in _facts(tuning) if e.get("what") == "phase" and e.get("searches")
                   for c in e.get("changed") or [] if c.get("linked")})


def unpinned(tuning: Run | None) -> str:
    """Why no place holds the choice, as the tuning run shows it: no place took it, and what its functions returned
    (none returned it; or one did, but not at every shape, not as a literal, or under arguments that do not tell the
    shapes apart)."""
    rets, shapes = linked_returns(tuning), sum(1 for _, e in _facts(tuning) if e.get("what") == "phase"
                                               and e.get("searches"))
    if not rets:
        return f"{NO_PLACE}, and {NO_RETURN}"
    by: dict[str, list[dict]] = {}
    for r in rets:
        by.setdefault(f"{r['func']}()", []).append(r)
    func, recs = max(by.items(), key=lambda kv: len(kv[1]))
    why = next((f"as {r['error']}" for r in recs if r.get("error")), None) or \
        ("under arguments no constant can hold" if any(not r.get("key") for r in recs) else None) or \
        ("under arguments that do not tell the shapes apart" if len({r["key"] for r in recs}) < len(recs) else None)
    return (f"{NO_PLACE}; {func} returned a value they timed at {len(recs)} of {shapes} shape(s)"
            + (f", {why}" if why else "") + ": no table of its returns could be pinned")


def returned_choices(tuning: Run | None, ran: list[dict]) -> list[dict]:
    """The search functions whose return is the choice, from the tuning run: at every shape it searched, the
    function returned a value the search held while timing, a literal can hold it and its key, and no key got two
    values. Deepest first (the search's own function before its callers): [{func, def_line, table, entries}]."""
    if tuning is None:
        return []
    phases = [e for _, e in _facts(tuning) if e.get("what") == "phase" and e.get("searches")]
    by_fn: dict[tuple, list[dict]] = {}
    for e in phases:
        for r in e.get("returned") or []:
            by_fn.setdefault((r["func"], r["def_line"]), []).append(r)
    depth: dict[str, int] = {}        # how deep each function stands on the searches' call paths
    for r in ran:
        path = [p["func"] for p in r.get("path") or []] + [r["func"]]
        for i, name in enumerate(path):
            depth[name] = max(depth.get(name, -1), i)
    out = []
    for (func, line), recs in by_fn.items():
        table: dict[str, str] = {}
        if not all(r.get("key") and r.get("text") and r.get("linked") for r in recs):
            continue
        if any(table.setdefault(r["key"], r["text"]) != r["text"] for r in recs):
            continue                        # its arguments do not tell the shapes apart
        if sum(any(r["func"] == func for r in e.get("returned") or []) for e in phases) < len(phases):
            continue                        # a shape whose search it did not return: not the choice's only road
        out.append({"func": func, "def_line": line, "entries": len(table),
                    "table": "{" + ", ".join(f"{k}: {v}" for k, v in table.items()) + "}",
                    "depth": depth.get(func, -1)})
    return sorted(out, key=lambda f: -f["depth"])


def took(base: Run, run: Run) -> tuple[bool, str] | None:
    """Whether a variant's run shows its searches gone: None where the search probe's hook saw nothing to judge by;
    (False, why) where the run still timed candidates at a shape's first call (the pin did not take: nothing
    follows from the run); (True, what) where it reached first calls and timed none there."""
    if not searches(base):
        return None
    still = [r for r in searches(run) if r["phase"].startswith("first_call:")]
    if still:
        r = still[0]
        return False, (f"{run.id} still searched: {sum(x['candidates'] for x in still)} candidates timed in "
                       f"{len({x['phase'] for x in still})} first call(s), the first in {r['func']}() at {r['phase']}"
                       f" ({r['seconds']:.1f} s): the pin did not take")
    firsts = [p for st in run.stages for p in st.phases if p.name.startswith("first_call:") and not p.open]
    if not firsts:
        return None      # no first call ended: a search cut off before its third candidate would not show
    return True, f"{run.id} timed no candidates in its {len(firsts)} first call(s)"
