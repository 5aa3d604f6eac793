"""The recompile probe's package: probe.py is what the parent knows of it (probes/spec.py, loaded by probes/door.py),
hook.py its worker side.

Importing the package loads nothing: a run's process that loads the hook loads only the hook and what it imports.
"""
