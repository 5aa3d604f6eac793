"""One process-tree setting that both sides of a run need, so it lives apart from either: the parent
(runner/isolate.py, at import) and the worker (worker/main.py, first thing) each make themselves a child
subreaper. Orphaned descendants then re-parent to them instead of init, so a double fork that starts a new
session and drops the run's marker from its environment is still found and killed with its run."""
import ctypes


def become_subreaper() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass
