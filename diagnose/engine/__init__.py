"""The diagnosis, end to end: scan -> baseline and probe runs -> bisector -> solo confirmations.

Takes a Submission, a Session to fill and a Runner; gives the concluded Session. Read in this order:
core.py (Engine.diagnose: the loop), runs.py (runs and their scheduling), planning.py (the probes' plans
and the bisector's combination test), preflight.py (the problem's reference alone), conclusions.py
(verdict, causes, fix, confirmations).
"""
from diagnose.engine.core import Engine, Options, probe_table

__all__ = ["Engine", "Options", "probe_table"]
