"""Which of my edits made it fail? The edit bisection between a GOOD and a BAD version of a submission.

Takes the RunPool of an engine whose submission is GOOD (its runs are the same faithful runs as `run`: fresh
containers, the harness's stages and budgets), BAD's source and the edits between them (ast_diff.py).
Gives the session's `edit_bisect` record: every tested combination (edits applied, decision, outcome,
stage times), and the 1-minimal set of edits that, applied to GOOD, fails as BAD fails (ddmin).

An edit always comes with the edits it cannot run without (the def of a new name it reads; the uses of a
name it renames away: ast_diff.requirements). A combination that still does not parse, or whose run
breaks on an edit alone (a NameError at an edited line), is untestable: never counted as a pass or a
failure. Failing means failing as BAD fails: the same status, stage and exception type; any other failure
is recorded as such. A time-based outcome that other runs may have skewed is rerun alone before it decides.
"""
from __future__ import annotations

from diagnose.analysis.causes.ddmin import ddmin
from diagnose.analysis.verdict import evidence
from diagnose.analysis.verdict.comparison import broken_by_edit
from diagnose.engine.conclusions import Conclusions
from diagnose.engine.runs import RunPool
from diagnose.errors import BadInput, CannotJudge
from diagnose.findings import Verdict
from diagnose.session import Role, Run
from diagnose.source import ast_diff
from diagnose.status import NO_EVIDENCE, Status

PASS, FAIL, OTHER, UNTESTABLE = "pass", "fail", "other failure", "untestable"


def _signature(run: Run) -> tuple:
    """Which failure: a crash elsewhere, or of another kind, is another failure, not BAD's."""
    st = run.failed_stage
    if st is None:
        return (str(run.outcome),)
    return (str(st.status), st.name, (st.exception or {}).get("type") if st.status == Status.CRASH else None)


def _said(sig: tuple | None) -> str:
    if not sig:
        return "?"
    return " ".join(str(x) for x in (sig[0], f"in {sig[1]}" if len(sig) > 1 else None,
                                      sig[2] if len(sig) > 2 else None) if x)


class EditSearch:
    def __init__(self, pool: RunPool, edits: list[ast_diff.Edit], owner: Conclusions):
        self.pool, self.edits = pool, edits     # every edit applied to GOOD is BAD, byte for byte
        self.owner = owner                      # settles the search's verdict: the one owner of conclusions
        self.by_id = {e.id: e for e in edits}
        self.needs = ast_diff.requirements(pool.source, edits)
        self.rows: dict[frozenset, dict] = {}
        self.want: Status | None = None
        self.want_sig: tuple | None = None      # BAD's failure: status, stage, exception type

    # -- one combination (`keep`: edit ids in order, with what they need: ast_diff.closure) ------------
    def _label(self, keep: list[str]) -> str:
        return "GOOD" if not keep else "BAD (every edit)" if len(keep) == len(self.edits) else "+".join(keep)

    def launch(self, keep) -> None:
        keep = ast_diff.closure(keep, self.needs)
        key = frozenset(keep)
        if key in self.rows:
            return
        source = ast_diff.apply(self.pool.source, [self.by_id[i] for i in keep])
        row = {"applied": keep, "label": self._label(keep), "run": None,
               "decision": None, "outcome": None, "note": ""}
        self.rows[key] = row
        if not ast_diff.parses(source):
            row.update(decision=UNTESTABLE, note="does not parse")
            return
        role = Role.BASELINE if not key else Role.SINGLE
        row["run"] = self.pool.launch(role, None if not key else "bisect", None if not key else row["label"],
                                     source).id

    def decide(self, keep) -> str | None:
        """pass | fail | other failure | untestable; None when the diagnosis was stopped."""
        keep = ast_diff.closure(keep, self.needs)     # an edit comes with the edits it cannot run without
        self.launch(keep)
        row = self.rows[frozenset(keep)]
        if row["decision"] is not None:
            return row["decision"]
        run = self.pool.session.run(row["run"])
        if not self.pool.wait(run):
            return None
        run = self._alone(run, keep)
        if run is None:
            return None
        row["outcome"] = str(run.outcome)
        row["seconds"] = {st.name: round(st.charged_s, 1) for st in run.stages if st.status != Status.SKIPPED}
        broke = broken_by_edit(run) if keep else None
        if broke:
            row.update(decision=UNTESTABLE, note=f"broken by the edit: {broke}")
        elif run.outcome in NO_EVIDENCE:
            row.update(decision=UNTESTABLE, note=f"the run says nothing ({run.outcome})")
        elif run.outcome == Status.OK:
            row["decision"] = PASS
        elif self.want_sig is None or _signature(run) == self.want_sig:
            row["decision"] = FAIL
        else:
            row.update(decision=OTHER, note=f"{_said(_signature(run))}, not BAD's {_said(self.want_sig)}")
        return row["decision"]

    def _alone(self, run: Run, keep) -> Run | None:
        """A time-based outcome that other runs may have skewed decides only from a solo rerun."""
        if not any(evidence.doubt(st) for st in run.stages):
            return run
        c = self.pool.launch(Role.CONFIRM, "bisect", self._label(keep), self.pool.sources[run.id], confirms=run.id)
        if not self.pool.wait(c):
            return None
        self.rows[frozenset(keep)]["note"] = f"decided by its solo rerun {c.id}"
        self.rows[frozenset(keep)]["run"] = c.id
        return c

    # -- the search -----------------------------------------------------------------------------------
    def run(self) -> dict:
        """GOOD and BAD, then ddmin over the edits with the same test the engine's bisector uses:
        `fails(keep)`, here "the edits in keep, applied to GOOD, fail as BAD fails"."""
        pool = self.pool
        pool.open()
        pool.release_held()
        try:
            every = [e.id for e in self.edits]
            self.launch([])
            self.launch(every)
            good, bad = self.decide([]), self.decide(every)
            self._check_ends(good, bad)
            bad_run = pool.session.run(self.rows[frozenset(every)]["run"])
            self.want, self.want_sig = bad_run.outcome, _signature(bad_run)
            minimal = ddmin(every, self.fails, prefetch=lambda subsets: [self.launch(k) for k in subsets])
            minimal = ast_diff.closure(minimal, self.needs)
            return self._record(minimal if self.fails(minimal) else [], every)
        finally:
            pool.close_workers()

    def fails(self, keep) -> bool:
        return self.decide(keep) == FAIL

    def _check_ends(self, good: str | None, bad: str | None) -> None:
        s = self.pool.session
        if good is None or bad is None:
            raise KeyboardInterrupt
        g = s.run(self.rows[frozenset()]["run"])
        b = s.run(self.rows[frozenset(e.id for e in self.edits)]["run"])
        if Status.NEEDS_GPU in (g.outcome, b.outcome):
            st = next(x for x in (g.failed_stage, b.failed_stage) if x is not None)
            raise CannotJudge(f"this machine cannot judge these versions: {st.message}")
        if good != PASS:
            st = g.failed_stage
            where = f" in {st.name}" + (f" ({st.phase})" if st.phase else "") if st else ""
            raise BadInput(f"GOOD does not pass here: it ended {g.outcome}{where}; bisect needs a GOOD that passes "
                           f"(run {g.id})")
        if bad != FAIL:
            raise BadInput(f"BAD does not fail here: it ended {b.outcome} (run {b.id}); bisect needs a BAD that "
                           f"fails under the same stages and budget")

    def _record(self, minimal: list[str], every: list[str]) -> dict:
        s = self.pool.session
        rows = list(self.rows.values())
        ran = [r for r in rows if r["run"] is not None and r["applied"] and len(r["applied"]) < len(every)]
        mrow = self.rows.get(frozenset(minimal)) if minimal else None
        out = {"edits": [{"id": e.id, "kind": e.kind, "where": e.where, "good_lines": list(e.good),
                          "summary": e.summary(), "bad_text": e.bad_text, "good_text": e.good_text,
                          "needs": ast_diff.in_order(self.needs[e.id])} for e in self.edits],
               "failure": _said(self.want_sig),
               "rows": rows, "minimal": minimal, "minimal_run": mrow["run"] if mrow else None,
               "want": str(self.want), "runs": len(ran) + 2, "exhaustive": 2 ** len(every),
               "good_run": self.rows[frozenset()]["run"], "bad_run": self.rows[frozenset(every)]["run"]}
        s.edit_bisect = out
        if minimal:
            ids = ", ".join(minimal)
            v = Verdict(self.want, message=f"the edits {ids} alone turn GOOD's pass into BAD's failure "
                                           f"({_said(self.want_sig)})",
                        runs=[out["good_run"], out["bad_run"], out["minimal_run"]])
        else:
            v = Verdict(Status.INCOMPLETE, message="no minimal set of edits could be verified",
                        runs=[out["good_run"], out["bad_run"]],
                        note="combinations that did not parse or broke on an edit alone decide nothing")
        self.owner.settle(v, complete=not self.pool.stop.is_set())
        return out
