"""The `lines` measure of a toggle's effect: the time the baseline spent in the statements the toggle edits
(a warmup loop, a search, work at import), from the sampler's inclusive line counts, against the time the
variant spent in the same statements wherever they now stand. A statement the edit moved (work deferred into the
first call) is found again by its text, and its time counts as moved, not removed. Pure.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

from diagnose.analysis.effects.effect_record import Effect
from diagnose.facts import observed
from diagnose.facts.measures import NOISE_ABS
from diagnose.session import Run, Session
from diagnose.status import Status

REMOVED_SHARE = 0.5     # the variant spent at most half the baseline's time in the suspect's statements
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


# -- the diff between the submission and a variant ---------------------------------------------------------

@dataclass(frozen=True)
class LineMap:
    same: dict            # baseline line -> variant line, for lines the edit left as they were
    deleted: dict         # baseline line -> its text, for lines the edit removed or changed
    inserted: dict        # variant line -> its text, for lines the edit added
    changed: dict         # variant line -> the baseline line it replaced (an edit in place: `range(10)` -> `range(1)`)

    def back(self, line: int) -> int | None:
        """The baseline line a variant line stands for: the same line, the line it replaced, or a moved one
        found by its text."""
        if line in self._back:
            return self._back[line]
        if line in self.changed:
            return self.changed[line]
        text = self.inserted.get(line, "").strip()
        return next((b for b, t in self.deleted.items() if text and t.strip() == text), None)

    @cached_property
    def _back(self) -> dict:
        return {v: b for b, v in self.same.items()}

    def forward(self, line: int) -> int | None:
        """The variant line that stands where a baseline line stood (kept, or edited in place)."""
        return self.same.get(line) or next((v for v, b in self.changed.items() if b == line), None)


@lru_cache(maxsize=256)
def line_map(diff: str | None, n_lines: int) -> LineMap:
    """The map of one variant's diff (parsed once: every measure of the run and the audit ask for it again)."""
    same, deleted, inserted, changed = {}, {}, {}, {}
    b = v = 1
    run: list[int] = []       # the deleted lines just before: added lines pair with them, in order
    hunk = False
    for text in (diff or "").splitlines():
        m = _HUNK.match(text)
        if m:
            while b < int(m.group(1)):          # untouched lines before the hunk keep their offset
                same[b], b, v = v, b + 1, v + 1
            run, hunk = [], True
            continue
        if not hunk:        # the file names above the first hunk
            continue
        tag, body = text[:1], text[1:]
        if tag == " ":
            same[b], b, v, run = v, b + 1, v + 1, []
        elif tag == "-":
            deleted[b], b = body, b + 1
            run.append(b - 1)
        elif tag == "+":
            inserted[v] = body
            if run:
                changed[v] = run.pop(0)
            v += 1
    while b <= n_lines:
        same[b], b, v = v, b + 1, v + 1
    return LineMap(same, deleted, inserted, changed)


def _statement_spans(source: str, lines) -> list[tuple[int, int]]:
    """The statement each line belongs to: the one that starts there, else the smallest that holds it."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, RecursionError, ValueError):
        return [(ln, ln) for ln in lines]
    stmts = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    out = set()
    for ln in lines:
        start = [n for n in stmts if n.lineno == ln]
        holds = start or [n for n in stmts if n.lineno <= ln <= (n.end_lineno or n.lineno)]
        if holds:
            n = min(holds, key=lambda n: (n.end_lineno or n.lineno) - n.lineno) if not start else \
                max(start, key=lambda n: (n.end_lineno or n.lineno) - n.lineno)
            out.add((n.lineno, n.end_lineno or n.lineno))
    return sorted(out)


def stages_both(base: Run, run: Run) -> list[tuple]:
    """(baseline stage, variant stage) for each stage both ran: a variant that got further is measured on the
    same ground as the baseline, not on the stages only it reached."""
    out = []
    for st in base.stages:
        other = run.stage(st.name)
        if other is not None and Status.SKIPPED not in (st.status, other.status):
            out.append((st, other))
    return out


def _phase_kind(phase: str) -> str:
    return "import" if phase == "submission_import" else phase.split(":")[0]


def _seconds_on(st, lines: set[int]) -> dict[str, float]:
    """Seconds the stage spent with one of these lines on the submission's stack, by kind of phase."""
    out: dict[str, float] = {}
    for phase, kinds in st.samples.items():
        n = sum(c for ln, c in (kinds.get("stack") or {}).items() if int(ln) in lines)
        if n:
            k = _phase_kind(phase)
            out[k] = out.get(k, 0.0) + n * (st.sample_interval_s or 0.01)
    return out


def _total(by_kind: dict) -> float:
    return sum(by_kind.values())


def _where(by_kind: dict) -> str:
    return ", ".join(f"{k} {s:.1f} s" for k, s in sorted(by_kind.items())) or "none"


def _site_lines(session: Session, probe_sites: tuple[str, ...], probe: str | None = None) -> list[int]:
    """The scan's sites of the probe's kinds, and the lines its plan found from what the baseline did
    (Plan.evidence["lines"]: a search's loop, wherever it is written)."""
    ran = {ln for p in session.probes if p.get("name") == probe for ln in (p.get("evidence") or {}).get("lines") or []
           if isinstance(ln, int)}
    return sorted({x["line"] for x in session.scan if x["suspect"] in probe_sites} | ran)


def _span_effect(pairs, lm: LineMap, span: tuple[int, int]) -> dict:
    """One baseline statement: seconds by phase kind in the baseline, in the variant where the statement stayed
    (edited in place or not), and in the variant where the edit moved it (found by its text); and, where Python
    counted them, its loop header's iterations in each run."""
    lines = set(range(span[0], span[1] + 1))
    kept = {x for x in map(lm.forward, lines) if x is not None}
    texts = {lm.deleted[b].strip() for b in lines if b in lm.deleted and lm.deleted[b].strip()}
    moved = {v for v, t in lm.inserted.items() if t.strip() in texts and v not in lm.changed}
    out = {"base": {}, "kept": {}, "moved": {}, "iters": [0, 0]}
    head = lm.forward(span[0])
    for bs, vs in pairs:
        for key, st, ln in (("base", bs, lines), ("kept", vs, kept), ("moved", vs, moved)):
            for kind, sec in _seconds_on(st, ln).items():
                out[key][kind] = out[key].get(kind, 0.0) + sec
        out["iters"][0] += sum(c.get(str(span[0]), 0) for c in bs.loops.values())
        out["iters"][1] += sum(c.get(str(head), 0) for c in vs.loops.values()) if head else 0
    return out


def _fell(before: float, after: float) -> bool:
    return before - after > max(NOISE_ABS, (1 - REMOVED_SHARE) * before)


def suspect_spans(session: Session, run: Run, sites: tuple[str, ...]) -> list[tuple[int, int]]:
    """The submission's statements whose work a variant's toggle takes away: those its edit changes, or, for an
    edit that only adds lines (a table pinned beside a search), the statements the probe's sites are."""
    src = session.submission.get("source") or ""
    lm = line_map(run.variant, len(src.splitlines()))
    return _statement_spans(src, sorted(lm.deleted) or _site_lines(session, sites, run.probe))


def _called_from(src: str, spans: list) -> list[tuple[int, int]]:
    """The bodies of the file's own functions that the suspect's statements call or hand on (a key=, a callback),
    directly or through each other: their loops (a helper that burns time) are the suspect's work, not work beside
    it."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, RecursionError, ValueError):
        return []
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    todo = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and any(a <= n.lineno <= b for a, b in spans)]
    seen: set[str] = set()
    while todo:
        # called, or handed on to be called (sorted(..., key=self._cost), a callback): the suspect's own work
        for c in (x for x in ast.walk(todo.pop()) if isinstance(x, (ast.Name, ast.Attribute))):
            name = c.id if isinstance(c, ast.Name) else c.attr
            if name in defs and name not in seen:
                seen.add(name)
                todo.append(defs[name])
    return [(defs[n].lineno, defs[n].end_lineno or defs[n].lineno) for n in seen]


def _other_loops(src: str, pairs, lm: LineMap, spans: list, bid: str, vid: str) -> list[str]:
    """Loops outside the suspect's statements (neither holding one nor held by one) whose time fell in the
    variant: work the toggle took away that is not its suspect's (a table pinned ahead of a guard that also
    skips a warmup)."""
    out, mine = [], list(spans) + _called_from(src, spans)
    for a, b in observed.loops(src):
        if any(a <= x <= b or x <= a <= y for x, y in mine):
            continue
        e = _span_effect(pairs, lm, (a, b))
        before, after = _total(e["base"]), _total(e["kept"]) + _total(e["moved"])
        if before >= NOISE_ABS and _fell(before, after):
            out.append(f"the loop at L{a} ({_where(e['base'])} in {bid}, {_where(e['kept'])} in {vid})")
    return out


def lines_effect(session: Session, base: Run, run: Run, sites: tuple[str, ...]) -> Effect:
    src = session.submission.get("source") or ""
    lm = line_map(run.variant, len(src.splitlines()))
    spans = suspect_spans(session, run, sites)
    pairs = stages_both(base, run)
    if not spans:
        return Effect(None, None, "the edit touched no statement of the submission")
    # The sampler runs in every run of a session or in none: a baseline without samples had it off, and a variant
    # without any beside a baseline with some spent no sampled moment anywhere (it ran in milliseconds)
    if not any(bs.samples for bs, _ in pairs):
        return Effect(None, None, f"no line samples in {base.id} (the sampler was off): nothing says how long "
                                  f"L{', L'.join(str(s[0]) for s in spans)} ran")
    fail = base.failed_stage
    fail_kind = _phase_kind(fail.phase) if fail is not None and fail.phase else None
    parts, outside, tot = [], [], {"base": 0.0, "kept": 0.0, "moved": 0.0}
    reached = removed = False
    for span in spans:
        e = _span_effect(pairs, lm, span)
        t = {k: _total(e[k]) for k in tot}
        tot = {k: tot[k] + t[k] for k in tot}
        (ib, iv) = e["iters"]
        fewer = ib > 1 and iv > 0 and iv <= REMOVED_SHARE * ib
        reached |= t["base"] > 0 or ib > 0
        span_removed = (t["base"] >= NOISE_ABS and _fell(t["base"], t["kept"] + t["moved"])) or fewer
        removed |= span_removed
        loop = f", {ib} -> {iv} loop passes" if ib else ""
        parts.append(f"L{span[0]}: {_where(e['base'])} in {base.id}, {_where(e['kept'])}"
                     + (f" (moved: {_where(e['moved'])})" if t["moved"] else "") + f" in {run.id}{loop}")
        if span_removed and fail_kind and e["base"] and fail_kind not in e["base"] and len(spans) > 1:
            outside.append(f"L{span[0]}, which ran in {'/'.join(sorted(e['base']))} ({t['base']:.1f} s in "
                           f"{base.id}), not where {base.id} failed ({fail_kind})")
    outside += _other_loops(src, pairs, lm, spans, base.id, run.id)
    what = "; ".join(parts)
    if not reached:
        return Effect(False, False, f"{base.id} never spent a sampled moment in L"
                                    f"{', L'.join(str(s[0]) for s in spans)} ({what})")
    if tot["base"] < NOISE_ABS and not removed:
        return Effect(True, None, f"{what}: too little time to tell whether it went")
    moved = not removed and tot["moved"] > NOISE_ABS
    return Effect(True, removed, what, moved=moved, outside=tuple(outside))
