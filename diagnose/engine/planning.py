"""Planning: every chosen probe's plan (from the source, then again from the baseline's evidence), launching
the toggles, and the bisector's combination test: does the failure come back with only these suspects kept?
"""
from __future__ import annotations

import hashlib

from diagnose.analysis.effects import partly
from diagnose.analysis.verdict import comparison, evidence
from diagnose.engine.runs import RunPool
from diagnose.session import Role, Run
from diagnose.source.edits import changed_range
from diagnose.source.scan import ScanResult
from diagnose.source.submission import Submission
from diagnose.status import Compared
from probes import door
from probes.base import RUN, TUNE, PlanContext, Toggle


class Planner:
    """The probes' plans, launched through the pool, and the bisector's combination test (`fails(keep)`)."""

    def __init__(self, pool: RunPool, sub: Submission, scan: ScanResult):
        self.pool, self.sub, self.scan = pool, sub, scan
        self.session, self.settings = pool.session, pool.settings
        self._launched: set[tuple] = set()

    def plan(self, baseline: Run | None, tuning: Run | None = None, only: list[str] | None = None) -> dict:
        """Every chosen probe's plan. Before the baseline has run, the probes that can start from the source
        plan (they start with the baseline), and those that read the baseline but say `plans_early`, where the
        rule below lets them; after it, every probe plans again from what the baseline did, and anything new
        it finds is launched then."""
        ctx = PlanContext(self.sub.source, self.scan, self.settings.gpu, baseline, tuning,
                          list(self.settings.rules), self.settings.cases)
        chosen = self.settings.probes if self.settings.probes is not None else door.names()
        plans = {i.name: door.ask(i.name, "plan", ctx=ctx) for i in door.infos()
                 if i.name in chosen and (baseline is not None or not i.needs_baseline or i.plans_early)
                 and (only is None or i.name in only)}
        if baseline is None:
            # A probe that reads the baseline starts early only where a search over the suspects is likely (two
            # or more removers from the source alone): the search then has every remover from the first wave,
            # and its combinations can start before the baseline ends. Otherwise it waits for the evidence.
            source_only = {n: p for n, p in plans.items() if not door.info(n).needs_baseline}
            if len(self.removers(source_only)) < 2:
                plans = source_only
        return plans

    def tune(self, plans: dict, baseline: Run) -> dict:
        """The probes that need a search's result (TUNE) get one tuning run: every distinct shape of the task
        once, the searches run to their end outside any budget, recorded and never timed against one. Those
        probes then plan again with it; their new plans are returned."""
        asking = [n for n, p in plans.items() if p.state == TUNE]
        if not asking or self.pool.stop.is_set():
            return {}
        args = {n: plans[n].hook_args for n in asking if plans[n].hook_args}
        run = self.pool.launch(Role.TUNING, None, "tuning run (not timed)", self.sub.source, stages=["tune"],
                               hook_args=args)
        run.note = "searches run to their end once, outside any budget, for their result: not a timed run"
        if not self.pool.wait(run):
            return {}
        return self.plan(baseline, tuning=run, only=asking)

    def launch_plan(self, plans: dict) -> None:
        """Every toggle of the plans that run, each variant once. The removing toggles go first: the search and
        the causes wait for them, and the alternatives (which cost the fixes) can start a little later."""
        groups: dict[tuple, list] = {}     # a probe's toggles that make one variant stay together, in plan order
        for p in plans.values():
            for t in p.toggles if p.state == RUN else []:
                groups.setdefault((t.probe, t.apply(self.sub.source) if t.apply else self.sub.source), []).append(t)
        ordered = sorted(groups.items(), key=lambda kv: not any(t.removes for t in kv[1]))
        for (_, source), toggles in ordered:
            for t in toggles:
                self._launch_toggle(t, source)

    def _launch_toggle(self, t: Toggle, source: str) -> None:
        for rep in range(self.settings.repeat if t.apply else 1):
            key = (t.probe, t.label, hashlib.sha256(source.encode()).hexdigest(), rep)
            if key in self._launched:      # planned again from the baseline's evidence: once is enough
                continue
            self._launched.add(key)
            role = Role.SINGLE if rep == 0 else Role.REPEAT
            self.pool.launch(role, t.probe, t.label, source, t.switches, rep)

    def record_plans(self, plans: dict) -> None:
        self.session.probes = [{"name": n, "state": p.state, "why": p.why, "evidence": p.evidence,
                                "toggles": [t.label for t in p.toggles]}
                               for n, p in sorted(plans.items(), key=lambda kv: door.names().index(kv[0]))]
        self.pool.save()

    def within(self, plans: dict, base: Run) -> list[Run]:
        """A probe's several edits that each failed alone but each took part of the time away
        (analysis/effects/partly.py), tried together as one more variant of that probe, as the search combines
        suspects across probes (an autotune whose key drops a float still tunes every config cold at each shape, and
        one pinned to its winners still tunes at every call: the two edits together tune a few configs once a
        shape). Edits that touch the same text are alternatives, not parts: of those the first in the probe's order
        is kept. The runs launched."""
        out = []
        for name, edits, runs in self._parts(plans, base):
            chosen, taken = [], []
            for t in edits:
                if not partly.part_removed(self.session, base, runs[t.label]):
                    continue
                a, b = changed_range(self.sub.source, t.apply(self.sub.source))
                if all(b <= x or y <= a for x, y in taken):
                    chosen.append(t)
                    taken.append((a, b))
            if len(chosen) < 2:
                continue
            try:
                source = self.sub.source
                for t in chosen:
                    source = t.apply(source)
            except Exception:  # noqa: BLE001 - edits that do not compose on this source: nothing to try
                continue
            out.append(self.pool.launch(Role.SINGLE, name, partly.JOINED + " + ".join(t.label for t in chosen),
                                        source))
        return out

    def _parts(self, plans: dict, base: Run):
        """(probe, its removing edits, their runs) for each probe whose several edits all ran alone and none fixed
        the failure alone: the edits that may be tried together."""
        for name, p in plans.items():
            edits = [t for t in p.toggles if t.removes and t.apply] if p.state == RUN else []
            runs = {t.label: self._single(name, t.label) for t in edits}
            if len(edits) < 2 or any(r is None or not self.pool.decided(r) for r in runs.values()) or any(
                    comparison.compare(self.session, base, r) == Compared.FIXED for r in runs.values()):
                continue        # one edit alone, one not run yet, or one that fixes it alone: nothing to join
            yield name, edits, runs

    def join_doubts(self, plans: dict, base: Run) -> list[Run]:
        """The edits' runs whose at-risk judgment waits for a measure alone on their GPU (they shared it): whether
        each edit alone failed is what joining them rests on, so each is rerun alone first (conclusions.confirm)."""
        return [r for _, _, runs in self._parts(plans, base) for r in runs.values()
                if evidence.unjudged(self.session, r) and not evidence.solo_reruns(self.session, r)]

    def _single(self, probe: str, label: str) -> Run | None:
        return next((r for r in self.session.runs if r.role == Role.SINGLE and r.probe == probe and r.toggle == label),
                    None)

    @staticmethod
    def removers(plans: dict) -> dict[str, Toggle]:
        return {n: next(t for t in p.toggles if t.removes) for n, p in plans.items()
                if p.state == RUN and door.info(n).bisect and any(t.removes for t in p.toggles)}

    @staticmethod
    def likely(plans: dict, removers: dict) -> list[list[str]]:
        """The combinations the source says are likely (a plan's `likely_with`), each keeping suspects that all
        have a remover, once each."""
        out = []
        for n, p in plans.items():
            keep = {n, *p.likely_with}
            if len(keep) >= 2 and keep <= set(removers):
                keep = sorted(keep, key=list(removers).index)
                out += [keep] if keep not in out else []
        return out

    def fails_for(self, removers: dict[str, Toggle]):
        """The search's test, `fails(keep, wait=True)`, over these suspects' removing toggles."""
        return lambda keep, wait=True: self.fails_with(keep, removers, wait=wait)

    def fails_with(self, keep: list[str], removers: dict[str, Toggle], wait: bool = True) -> bool | None:
        """With only the suspects in `keep` left in, does the baseline's failure come back? Runs only the
        stages up to the one that failed: they tell. None when the run cannot tell (see comparison.compare)."""
        try:
            source = self._combined(keep, removers)
        except Exception:  # noqa: BLE001 - a toggle that cannot apply to this combination: it tells nothing
            self.pool.fail()
            return None
        base = self.session.baseline
        failed = base.failed_stage if base is not None and self.pool.done(base) else None
        stages = self.settings.through(failed.name) if failed else None
        keep = self._kept(keep, removers)
        removed = [n for n in removers if n not in keep]
        label = "keep " + " + ".join(keep) if keep else "all suspects removed"
        if source == self.sub.source:
            run = base
        else:
            run = self.pool.launch(Role.COMBINATION, "+".join(sorted(removed)) or None, label, source, stages=stages,
                              removed=tuple(sorted(removed)), reuse=True)
        if not wait:
            return None
        if not self.pool.wait(run):
            return None
        verdict = comparison.compare(self.session, base, run) if run is not base else Compared.SAME
        # a failure of the same kind that only came later still fails: the suspects kept are not shown to be
        # needed for it, so only a run that got past the failure answers "no"
        return {Compared.SAME: True, Compared.MOVED: True, Compared.FIXED: False}.get(verdict)

    def verify_together(self, removers: dict[str, Toggle]) -> Run | None:
        """Causes that each fail on their own (bisection "also"): their edits together are the fix, so that
        combination runs as one variant through every stage, as a single toggle that fixed it would."""
        b = self.session.bisection or {}
        needed = [*(b.get("minimal") or []), *(n for group in b.get("also") or [] for n in group)]
        if not b.get("also") or not needed or any(n not in removers for n in needed):
            return None
        keep = [n for n in removers if n not in needed]
        try:
            source = self._combined(keep, removers)
        except Exception:  # noqa: BLE001 - the toggles do not compose on this source: nothing to verify
            return None
        label = "together: " + " + ".join(removers[n].label for n in needed)
        return self.pool.launch(Role.COMBINATION, "+".join(sorted(needed)), label, source, full=True,
                                removed=tuple(sorted(needed)))

    @staticmethod
    def _kept(keep: list[str], removers: dict[str, Toggle]) -> list[str]:
        # A kept suspect keeps what it requires when the only way to remove that is blunt (compile off
        # would take the recompiles or the fullgraph failure away with it)
        return list(keep) + [r for k in keep for r in door.info(k).requires
                             if r in removers and r not in keep and comparison.toggle_rank(removers[r]) == 0]

    def _combined(self, keep: list[str], removers: dict[str, Toggle]) -> str:
        source = self.sub.source
        kept = self._kept(keep, removers)
        for n in removers:
            if n not in kept:
                source = removers[n].apply(source)
        return source
