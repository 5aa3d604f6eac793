"""One process-tree setting that every side that starts processes needs, so it lives apart from each: the parent
(runner/isolate.py, at import) and the worker (worker/main.py, first thing) each make themselves a child
subreaper, and so does a triage's controller once it begins stopping (triage/stopping.py). Orphaned descendants
then re-parent to them instead of init, so a double fork that starts a new session and drops the run's marker from
its environment is still found and killed with its run, and a command whose parent is killed first is still one
of the triage's to stop. It imports nothing of diagnose's: the worker loads it before anything else."""
import ctypes

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):      # not Linux: descendants are gathered before any is killed
        pass
