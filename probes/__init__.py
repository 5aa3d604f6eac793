"""The probes: one package per suspect (probes/<name>/), the registry of their names (registry.py), the hook
specifications they are checked against (spec.py), the plain types they hand the engine (base.py), every probe's
scan finder (finders.py), and the one door diagnose/ reaches them through (door.py).

This file imports nothing, so a run's process that loads one probe's worker hook (probes/<name>/hook.py) loads
that hook and what it imports, never the registry nor the parent's side of any probe.
"""
