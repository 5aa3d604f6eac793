"""The diagnosis, end to end: scan -> baseline and probe runs -> bisector -> solo confirmations.

Takes a Submission, a Session to fill and a Runner; gives the concluded Session. Read in this order:
core.py (Engine.diagnose: the script), runs.py (RunPool: launch, wait, decided), planning.py (Planner: the
probes' plans and the bisector's test `fails(keep)`), preflight.py (the problem's reference alone),
conclusions.py (the one owner of the verdict, causes, fix and claims; confirmations), observer.py (what a
watcher hears), edit_search.py (bisect's search over edits).
"""
from diagnose.engine.core import Engine, probe_table

__all__ = ["Engine", "probe_table"]
