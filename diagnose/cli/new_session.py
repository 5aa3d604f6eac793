"""A new session's record: what was submitted (the path as the user would write it), the task, and the harness as
this machine runs it (the evaluator, the rules, the target GPUs, the container's environment and places, how many
runs at once). Built once, before any run; nothing here runs the submission or writes a file.
"""
from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from diagnose.runs import device
from diagnose.session import Session

if TYPE_CHECKING:
    from diagnose.runs.settings import Settings
    from diagnose.source.submission import Submission


def new_session(sub: Submission, settings: Settings, head: dict, board: dict | None, gpus: str | None) -> Session:
    """A new session for `sub` under `settings`: what was submitted, the task, and the harness as this machine runs
    it (`head`: the submission's header, `board`: its leaderboard entry or None, `gpus`: --gpus as given)."""
    import diagnose
    from diagnose.engine.run_state import VARIANT_NICE
    from diagnose.runs.runner.container import env_record, left_out
    from diagnose.tasks.loader import stage_files
    from probes.door import scan
    t, gpu, jobs = settings.task, settings.gpu, settings.jobs
    session = Session(
        submission={"path": shown_path(sub.path), "name": sub.path.name, "sha256": sub.sha256, "source": sub.source},
        task={**t.to_dict(), "directory": "(built-in)" if t.builtin else shown_path(Path(t.directory)),
              "files": [[n, s if s == "@SUBMISSION@" else shown_path(Path(s))] for n, s in t.files]},
        command=["diagnose"] + sys.argv[1:], tool_version=diagnose.__version__,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        harness={"name": "gpumode", "depth": settings.depth, "stages": list(settings.stages),
                 "budgets": settings.budgets,
                 "compile_step": settings.compile_step, "ranking_by": t.ranking_by,
                 "cpu_only": not gpu, "sample_repeats": settings.sample_repeats, "evaluator": _evaluator(t),
                 "rules": list(settings.rules),
                 "target": target_record(head, board, t.gpus, device.gpu_names() if gpu else []),
                 "container": {"dropped_env": left_out(os.environ), "env": env_record(os.environ),
                               "shared": list(settings.shared),
                               # what the harness writes into the container before each stage
                               "files": sorted(stage_files(t, sub.source)),
                               # this machine's places, which a report shows as placeholders (output/public.py)
                               "places": _places()}},
        scan=scan(sub.source, sub.tree).to_list())
    session.harness["concurrency"] = f"up to {jobs} run(s) at once" + (
        f" over GPUs {gpus}" if settings.gpu_ids else "") + \
        ((f"; toggles and combinations at CPU nice {VARIANT_NICE}, yielding to the baseline" +
          ("; they start once the baseline has its CUDA context" if gpu else "")) if jobs > 1 else "")
    return session


def shown_path(p: Path) -> str:
    """A path as a user would write it: relative to the working directory when inside it."""
    try:
        return str(p.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def target_record(head: dict, board: dict | None, task_gpus: list[str], here: list[str]) -> dict:
    """The GPUs the submission is meant for (its header, the leaderboard's list, the task's own) and this
    machine's, for the report's target paragraph (analysis/verdict/target.py)."""
    return {"leaderboard": (board or {}).get("name") or (head.get("leaderboard") or {}).get("value"),
            "listed_in": (board or {}).get("listed_in"), "header_gpu": (head.get("gpu") or {}).get("value"),
            "header_line": (head.get("gpu") or {}).get("line"),
            "gpus": list(dict.fromkeys((board or {}).get("gpus", []) + list(task_gpus))), "here": here}


def _evaluator(t) -> str:
    if t.evaluator:
        return (f"the problem's own {t.evaluator} (from {t.evaluator_source}), run as the harness runs it; it decides "
                f"inputs, repeats, flush, seeds and checks")
    return ("diagnose's model of GPU MODE's eval_better_bench.py: 50 inputs per case, CUDA events around 50 calls, "
            "an L2 flush per repeat, the stopping rule" + ("" if t.builtin else " (the folder ships no evaluator)"))


def _places() -> dict:
    import tempfile
    return {"python": sorted({sys.prefix, sys.base_prefix, sys.exec_prefix}), "home": os.path.expanduser("~"),
            "tmpdir": tempfile.gettempdir()}
