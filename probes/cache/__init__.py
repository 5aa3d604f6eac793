"""The cache probe's package: probe.py is what the parent knows of it (probes/spec.py, loaded by probes/door.py).

Importing the package loads nothing.
"""
