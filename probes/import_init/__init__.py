"""The import_init probe's package: probe.py is what the parent knows of it (probes/spec.py, loaded by probes/door.py),
find.py its scan finder.

Importing the package loads nothing.
"""
