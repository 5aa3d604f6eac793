"""Isolated runs: one harness stage of one variant, in a fresh container, measured.

Takes a Job (a variant's source and the stages to run); gives StageResults. The parent side (runner/)
spawns and watches; the child side (worker/) is the only code that imports torch. They share only
protocol.py (the worker spec, environment names and event shapes), the harness model (harness.py) and the
subreaper setting (subreaper.py); device.py is what the parent knows of the machine without torch.
"""
