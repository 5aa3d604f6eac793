"""What a run can support: the rules that keep a conclusion within its evidence. Pure functions.

A run's outcome that rests on a wall time against a budget (a timeout, a prediction over the budget, a
pass by a thin margin) is only as good as the conditions it was measured in. Every stage records what
else was happening (other runs alive, time its processes waited for a CPU, time it shared the GPU), so:

- A time-based failure that lost more than the noise floor to interference, or a pass whose margin is
  within the noise, is *doubtful*: the engine reruns that variant alone (a solo run: no other run
  alive) before a conclusion may rest on it, or the conclusion says it is unconfirmed.
- A pass under contention is not doubtful when its margin is wide: contention only slows a run down.
- A crash or a wrong result does not depend on time: it is never doubtful for this reason.
- When the solo rerun ends differently from the original, the variant is flaky: it supports nothing.
- A timing judgment (at risk, "needs N× its budget", a pass within the noise of its budget) rests only on a
  stage measured with no other run on its GPU: the run's own, else its solo rerun's. A neighbour on the GPU
  inflates exactly the spread the harness's stopping rule reads. Until a solo rerun measures it, the report
  says how many runs shared the GPU and that the judgment waits (`waits`), and the engine asks for that rerun.
- On a CPU, a stage other work took more than the noise floor from (`loaded`) is no measure either: its thin pass or a
  variant's timeout waits for a solo rerun, which decides the variant (`decider`; other programs' load: `host_busy`).

The noise floor is the one the bisector uses for time savings: 5 % of the budget, and at least 0.25 s.
"""
from __future__ import annotations

from dataclasses import dataclass

from diagnose.analysis.verdict.started import NEVER, unstarted
from diagnose.analysis.verdict.too_far import how_far
from diagnose.facts.measures import NOISE_ABS, NOISE_REL
from diagnose.session import Role, Run, Session, StageResult
from diagnose.status import FAILURES, NO_EVIDENCE, TIME_BASED, Status

BUSY_DELAY_SHARE = 0.10    # a stage that waited this share of its time for a CPU ran on a busy host
BUSY_OTHERS_SHARE = 0.5    # ... or one during which the rest of the host kept half of all CPUs busy
# A pass measured beside other runs on its GPU is judged only with this much room (a share of its budget): on an
# H200 the same one-config autotune fix was predicted 11.0 s and 15.2 s beside the same neighbour (38 % apart),
# far past the 5 % noise floor of runs measured alone
SHARED_ROOM = 0.4
WAITS = "waits for a solo rerun"   # how a report defers a timing judgment measured beside other runs on the GPU


def noise_floor(seconds: float) -> float:
    return max(NOISE_ABS, NOISE_REL * seconds)


def judged_seconds(st: StageResult) -> float:
    """The time a stage's status rests on: the prediction where it sets the status (on a GPU), else the
    charged time. On a CPU a prediction is shown but never judged against a budget."""
    return st.predicted_s if st.predicted_s is not None and _on_gpu(st) else st.charged_s


def _on_gpu(st: StageResult) -> bool:
    return any(e["k"] == "env" and e.get("cuda_available") for e in st.events)


def _on_cpu(st: StageResult) -> bool:
    """The stage's worker said it had no GPU (a record that says nothing of it is judged as before)."""
    return any(e["k"] == "env" and e.get("cuda_available") is False for e in st.events)


def on_cpu(run: Run) -> bool:
    return any(map(_on_cpu, run.stages)) and not any(map(_on_gpu, run.stages))


def loaded(st: StageResult) -> bool:
    """On a CPU, other work (our other runs, other programs) took more than the noise floor of its budget from the
    stage: its time says how busy the host was as much as what the code costs. (On a GPU: sharers.)"""
    return _on_cpu(st) and st.contention.interference_s > noise_floor(st.budget_s)


def measured_alone(run: Run, st: StageResult) -> bool:
    """Was the stage measured with nothing of ours beside it? A solo rerun is the quietest measure a CPU gives:
    the load of other programs stays in it, and no rerun would take it away."""
    return not sharers(st) and (run.role == Role.CONFIRM or not loaded(st))


def doubt(st: StageResult) -> str | None:
    """Why this stage's time-based status might not hold on a quiet machine, or None."""
    if st.lost_worker:
        return None     # a dead pool worker's task is never answered: no amount of time changes that
    c = st.contention
    floor = noise_floor(st.budget_s)
    if st.status in (Status.TIMEOUT, Status.AT_RISK):
        if c.interference_s > floor:
            parts = [f"{c.run_delay_s:.1f} s waiting for a CPU"]
            beside = f"beside {len(c.overlapped)} other run(s)" if c.overlapped else "on a busy host"
            return (f"{st.name} {st.status} after losing {c.interference_s:.1f} s to other work "
                    f"({', '.join(parts)}) {beside}")
        if st.status == Status.AT_RISK and st.predicted_s is not None and st.predicted_s - st.budget_s <= floor:
            return f"{st.name} is predicted {st.predicted_s:.1f} s, within the noise of its {st.budget_s:g} s budget"
        if st.status == Status.AT_RISK and sharers(st):
            return f"{st.name} {st.status}, measured beside {_runs(len(sharers(st)))} on its GPU"
        return None
    if st.status == Status.OK and st.budget_s:
        margin = st.budget_s - judged_seconds(st)
        # a CPU pass far past its budget ran up to a check's cap instead (no time is judged there): no doubt to settle
        if margin <= floor and (_on_gpu(st) or margin >= -floor):
            return f"{st.name} passed with only {margin:.1f} s to spare of {st.budget_s:g} s"
    return None


def _thin(st: StageResult) -> bool:
    return st.status == Status.OK and bool(st.budget_s) and \
        st.budget_s - judged_seconds(st) <= noise_floor(st.budget_s)


def _near(st: StageResult) -> bool:
    """A pass too close to its budget to judge from where it was measured: within the noise floor, or, beside
    other runs on its GPU, within SHARED_ROOM of it (a CPU's runs share no GPU)."""
    return _thin(st) or (st.status == Status.OK and bool(st.budget_s) and _on_gpu(st) and bool(sharers(st)) and
                         st.budget_s - judged_seconds(st) <= SHARED_ROOM * st.budget_s)


def thin(session: Session, run: Run) -> str | None:
    """A pass that no quiet rerun can make safe: a stage that passed within the noise floor of its budget (a
    pass by 0.1 s of 15 s, where runs differ by 0.75 s), measured alone on its GPU (`alone`: where the run shared
    it, its solo rerun's stage decides, and one that passed with room there is no thin pass). At risk, never a
    fix. None when every margin is wide enough, or when the thin stage has no measure alone (`unjudged`)."""
    for st in decider(session, run).stages:
        # a pass near its budget where it shared the GPU is judged from its solo rerun, however wide it looked
        got = alone(session, run, st.name) if _near(st) else None
        if got and _thin(got[1]):
            r, a = got
            margin = a.budget_s - judged_seconds(a)
            # a CPU's solo rerun that stands for its variant (decider) names itself: the audit reads where it was alone
            where = "" if r is run and not (r.role == Role.CONFIRM and _on_cpu(a)) else f" ({_alone_on(a)}, in {r.id})"
            if margin < 0:      # a prediction over the budget: the stage's own sample passed, the harness's would not
                return (f"{a.name} is predicted {judged_seconds(a):.1f} s against its {a.budget_s:g} s budget{where}, "
                        f"though its sample ran in {a.charged_s:.1f} s")
            return (f"{a.name} passed in {judged_seconds(a):.1f} s of {a.budget_s:g} s, {margin:.1f} s to "
                    f"spare, within the ±{noise_floor(a.budget_s):.2f} s noise floor" + where)
    return None


def sharers(st: StageResult) -> list[str]:
    """The other runs alive on the stage's GPU while it ran. A record that does not say which GPU each run was on
    (sessions before it was recorded) counts every run alive."""
    c = st.contention
    return list(c.overlapped if c.gpu_shared is None else c.gpu_shared)


def _runs(n: int) -> str:
    return f"{n} other run{'' if n == 1 else 's'}"


def _alone_on(st: StageResult) -> str:
    return "alone on the CPU" if _on_cpu(st) else "alone on its GPU"


def waits(st: StageResult, what: str) -> str:
    """What a report says instead of a timing judgment of `st` measured beside other runs on its GPU (on a CPU:
    beside other runs, or losing time to other work)."""
    if not loaded(st):
        where = f"shared its {'CPU' if _on_cpu(st) else 'GPU'} with {_runs(len(sharers(st)))}"
    else:
        where = (f"shared the CPU with {_runs(len(sharers(st)))} and " if sharers(st) else "") + \
            f"lost {st.contention.interference_s:.1f} s to other work"
    return f"{st.name} {where}: {what} {WAITS}"


def alone(session: Session, run: Run, name: str) -> tuple[Run, StageResult] | None:
    """The run's stage `name` as measured with no other run on its GPU, and the run that measured it: the run's
    own, else its latest solo rerun's; None when neither measured it so."""
    for r in [run] + solo_reruns(session, run)[::-1]:
        st = r.stage(name)
        if st is not None and st.status != Status.SKIPPED and measured_alone(r, st):
            return r, st
    return None


def needs_solo(st: StageResult) -> bool:
    """Would a timing judgment of this stage (at risk, how far over its budget, a pass within the noise) rest on a
    measure beside other runs on its GPU? On a CPU, also a timeout that other work took time from."""
    if st.status in TIME_BASED and loaded(st):
        return True
    judged = st.status == Status.AT_RISK or _near(st) or (st.status in TIME_BASED and how_far(st) is not None)
    return judged and (bool(sharers(st)) or loaded(st))


def unjudged(session: Session, run: Run) -> str | None:
    """Where the run's at-risk stage or its pass within the noise shared its GPU and no solo rerun measured that
    stage alone: what the report says instead of the judgment. None otherwise."""
    for st in run.stages:
        if (st.status == Status.AT_RISK or _near(st)) and alone(session, run, st.name) is None:
            over = judged_seconds(st) > st.budget_s
            return waits(st, "whether it is at risk" if st.status == Status.AT_RISK else
                         f"whether its {judged_seconds(st):.1f} s (predicted) is over its {st.budget_s:g} s budget"
                         if over else f"whether its pass is within the noise of its {st.budget_s:g} s budget"
                         if _thin(st) else f"whether its {judged_seconds(st):.1f} s (predicted) fits its "
                                           f"{st.budget_s:g} s budget on a GPU of its own")
    return None


def far(session: Session, run: Run, st: StageResult | None, shapes: int | None = None,
        line: int | None = None) -> str | None:
    """How far a stage is over its budget (too_far.how_far), said only from the stage measured alone on its GPU:
    the run's own, else its solo rerun's (named); with neither, how many runs shared the GPU and that the figure
    waits for a solo rerun. None where the stage says nothing of it."""
    if st is None or how_far(st, shapes, line) is None:
        return None
    got = alone(session, run, st.name)
    if got is None:
        return waits(st, "how far it is from its budget")
    r, a = got
    said = how_far(a, shapes, line)
    return said if said is None or r is run else f"{said} (measured {_alone_on(a)} in {r.id})"


def run_doubt(run: Run) -> str | None:
    """The first doubt among the stages that decided this run's outcome."""
    for st in run.stages:
        if st.status == Status.SKIPPED:
            continue
        d = doubt(st)
        if d:
            return d
        if st.status in FAILURES:
            return None
    return None


@dataclass(frozen=True)
class Effective:
    """The outcome a conclusion may use for a run, and how sure that is."""
    outcome: Status
    confirmed: bool
    note: str = ""            # why unconfirmed or flaky
    flaky: bool = False


def confirmations(session: Session, run: Run) -> list[Run]:
    return [r for r in session.runs if r.role == Role.CONFIRM and r.confirms == run.id and r.stages]


def solo_reruns(session: Session, run: Run) -> list[Run]:
    """The run's solo reruns that say something about the submission, oldest first."""
    return [c for c in confirmations(session, run) if c.outcome not in NO_EVIDENCE]


def effective(session: Session, run: Run) -> Effective:
    never = unstarted(run)
    if never:       # no code of the submission ran: its ending is this machine's or ours, no evidence (started.py)
        return Effective(Status.INCOMPLETE, False, f"{run.id} {NEVER}: {never}")
    # a solo rerun on a CPU is the measure its run is decided by: nothing quieter is to be had (decider)
    d = None if run.role == Role.CONFIRM and on_cpu(run) else run_doubt(run)
    if d is None:
        return Effective(run.outcome, True)
    solo = solo_reruns(session, run)
    if not solo and run.outcome == Status.AT_RISK and unjudged(session, run):
        # at risk is a timing judgment: measured beside other runs on the GPU, it is not made at all
        return Effective(Status.INCOMPLETE, False, f"unconfirmed: {unjudged(session, run)}")
    if not solo:
        return Effective(run.outcome, False, f"unconfirmed: {d}; no solo rerun was made")
    if all(_ending(c) == _ending(run) for c in solo):
        return Effective(run.outcome, True, f"confirmed by a solo rerun ({', '.join(c.id for c in solo)})")
    last = solo[-1]
    if decider(session, run) is last:
        return Effective(last.outcome, True, f"decided by its solo rerun {last.id}: {run.id} ended {_said(run)} ({d})")
    return Effective(last.outcome, False, f"flaky: {run.id} ended {_said(run)} ({d}), its solo rerun "
                                          f"{last.id} ended {_said(last)}", flaky=True)


def decider(session: Session, run: Run) -> Run:
    """The run whose record stands for `run`: on a CPU, a variant whose time-based ending other work may have
    changed (run_doubt) is decided by its latest solo rerun where that one ended by time too (a pass, or over its
    budget): what the harness would see with the CPU to itself. Any other run stands for itself."""
    if run.role not in (Role.SINGLE, Role.COMBINATION) or not on_cpu(run) or run_doubt(run) is None:
        return run
    solo = solo_reruns(session, run)
    timed = (Status.OK,) + TIME_BASED
    return solo[-1] if solo and run.outcome in timed and solo[-1].outcome in timed and on_cpu(solo[-1]) else run


def _ending(run: Run) -> tuple:
    """How a run ended: its outcome and the stage that ended it. A timeout in another stage is another
    ending: it puts the failure somewhere else."""
    failed = run.failed_stage
    return run.outcome, failed.name if failed else None


def _said(run: Run) -> str:
    failed = run.failed_stage
    return f"{run.outcome} in {failed.name}" if failed else str(run.outcome)


def host_busy(session: Session) -> str | None:
    """A hyperfine-style warning when the runs' own processes waited for a CPU a notable share of time."""
    stages = [s for r in session.runs for s in r.stages if s.status != Status.SKIPPED and s.wall_s > 0]
    if not stages:
        return None
    delay = sum(s.contention.run_delay_s for s in stages)
    wall = sum(s.wall_s for s in stages)
    load = max(s.contention.load_per_cpu for s in stages)
    capacity = sum(s.wall_s * (s.contention.cpus or 1) for s in stages)
    others = sum(s.contention.others_cpu_s for s in stages) / capacity if capacity else 0.0
    if delay / wall >= BUSY_DELAY_SHARE or load > 1.5 or others >= BUSY_OTHERS_SHARE:
        return (f"the host was busy: the runs' processes waited {delay:.1f} s for a CPU over {wall:.0f} s of runs "
                f"({delay / wall:.0%}), other work kept {others:.0%} of the CPUs busy meanwhile, and the load "
                f"reached {load:.1f} per CPU. Time-based conclusions were confirmed by solo reruns where they "
                f"depended on it; treat the timings as upper bounds.")
    return None
