"""The names a run's jail (runs/jail.py) shares with the runner and the worker, apart from protocol.py: the jail
starts in every step, and imports nothing it does not need (protocol.py's dataclasses cost it a third of its start).
"""
JAIL_ENV = "DIAGNOSE_JAIL"           # the walls a run's jail is asked for, as JSON
WALLS_ENV = "DIAGNOSE_WALLS"         # the walls it made (or why it made none), as JSON, for the worker to report
JAIL_MODULE = "diagnose.runs.jail"   # run as `python -S -m`: a run's own process space, network and file system
STEP_PID = 2                         # a jailed step's pid inside its namespace: its init's first and only fork
