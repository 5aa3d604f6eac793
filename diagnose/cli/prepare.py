"""From the command line's values to what a diagnosis needs: every value checked up front (one BadInput
naming the option), the submission and task loaded, the run settings, and a new session (new_session.py).

Nothing here runs the submission or writes a file.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from diagnose.cli.options import DEFAULT_TASK, Shared, at_least, gpu_list, positive, probe_list, stage_list
from diagnose.errors import BadInput
from diagnose.runs import device, harness
from diagnose.source.popcorn import headers

if TYPE_CHECKING:       # the runner and the session load lazily: `diagnose --help` imports none of them
    from diagnose.runs.settings import Settings
    from diagnose.session import Session
    from diagnose.source.submission import Submission


@dataclass
class Inputs:
    """What `run` and `check` are given: the submission, the options every command shares, and `run`'s own."""
    submission: Path
    opts: Shared = field(default_factory=Shared)
    full: bool = False
    max_rss: float | None = None
    keep: bool = False
    sample_repeats: int = 10
    sample: bool = True
    repeat: int = 1


@dataclass
class Prepared:
    """Everything a diagnosis starts from, checked: the submission, its settings, a new session, and what the
    header resolved (`board`: the leaderboard's entry, or None) and the problem folder as the user named it."""
    sub: Submission
    settings: Settings
    session: Session
    board: dict | None = None
    folder: str = ""


def _problem_from_header(i: Inputs, head: dict) -> tuple[Path | None, dict | None]:
    """--problem wins; else the `#!POPCORN leaderboard` header, resolved in the reference-kernels checkout
    (--problems-root, or DIAGNOSE_PROBLEMS_ROOT). A header for another problem with no way to find it is bad
    input: the built-in task would judge the wrong problem."""
    from diagnose.tasks.leaderboards import ENV, resolve, root_from
    from diagnose.tasks.loader import BUILTIN
    board = head.get("leaderboard")
    if i.opts.problem is not None or board is None:
        return i.opts.problem, None
    root = root_from(i.opts.problems_root)
    if root is not None:
        entry = resolve(board["value"], root)
        return entry["directory"], entry
    if board["value"] in BUILTIN:
        return None, None
    raise BadInput(f"{i.submission}:{board['line']}: the header names leaderboard '{board['value']}'; give a "
                   f"reference-kernels checkout with --problems-root DIR (or {ENV}), or its folder with --problem DIR")


def _rules(t) -> list[dict]:
    """What the folder's evaluator sets for the submission (tasks/rules.py)."""
    from diagnose.tasks.rules import evaluator_rules
    if not t.evaluator:
        return []
    path = next((src for name, src in t.files if name == t.evaluator), None) or Path(t.directory) / t.evaluator
    return evaluator_rules(path) if Path(path).is_file() else []


def _worker_hooks() -> tuple[str, ...]:
    """The probes' own worker hooks: every run records the evidence each probe needs (worker/plugins.py)."""
    from probes.door import worker_hooks
    return tuple(worker_hooks())


def _walls_asked() -> dict:
    """How the user asks each run to be walled off, from the environment (each named in the report)."""
    paths = lambda name: tuple(p for p in os.environ.get(name, "").split(os.pathsep) if p)  # noqa: E731
    # where the kernel's namespaces misbehave, they can be left off; directories of this machine's the runs may
    # use in place (DIAGNOSE_SHARE: state outside every container, reads there are this machine's state); what no
    # run may see (DIAGNOSE_HIDE: a triage's out folder, which holds its ledger's key); this machine's network for
    # a submission that downloads at run time (DIAGNOSE_NETWORK=host)
    network = "host" if os.environ.get("DIAGNOSE_NETWORK") == "host" else "own"
    return dict(private_mounts=os.environ.get("DIAGNOSE_PRIVATE_MOUNTS", "1") != "0", shared=paths("DIAGNOSE_SHARE"),
                hidden=paths("DIAGNOSE_HIDE"), network=network)


def prepare(i: Inputs) -> Prepared:
    from diagnose.cli.new_session import new_session
    from diagnose.runs.protocol import Depth
    from diagnose.runs.settings import Settings
    from diagnose.source.submission import load_submission
    from diagnose.tasks.loader import load_task
    o = i.opts.check()                   # every shared value, before any work
    positive("--max-rss", i.max_rss)
    at_least("--repeat", i.repeat, 1)
    at_least("--sample-repeats", i.sample_repeats, 2)
    stages, compile_step = stage_list(o.stages)
    names = probe_list(o.probes)
    gpu_ids = gpu_list(o.gpus)
    sub = load_submission(i.submission)
    gpu = device.has_gpu()
    head = headers(sub.source)
    problem, board = _problem_from_header(i, head)
    t = load_task(problem, o.task or DEFAULT_TASK, small=o.small if o.small is not None else not gpu)
    rules = _rules(t)
    jobs = o.jobs or device.default_jobs()
    if t.world_size > 1:
        jobs = 1      # the evaluator takes every GPU for its ranks
    settings = Settings(task=t, stages=tuple(stages),
                        budgets=harness.stage_budgets(o.budget, t.timeouts, o.compile_budget),
                        depth=Depth.FULL if i.full else Depth.PREDICT, sample_repeats=i.sample_repeats,
                        max_rss_mb=i.max_rss, keep=i.keep, compile_step=compile_step, sample=i.sample,
                        **_walls_asked(),
                        gpu_ids=tuple(gpu_ids), probes=None if names is None else tuple(names), jobs=jobs,
                        repeat=i.repeat, gpu=gpu, bisect=names != [], rules=tuple(rules), hooks=_worker_hooks())
    session = new_session(sub, settings, head, board, o.gpus)
    return Prepared(sub=sub, settings=settings, session=session, board=board, folder=_named(t, problem))


def _named(t, problem: Path | None) -> str:
    """The problem folder as the user named it (the option, or the checkout's yaml under the root as given): never
    where it lies on this machine, unless that is what the user gave."""
    return f"(built-in {t.name})" if t.builtin else os.path.normpath(str(problem))
