"""Triage: many submissions at once, each `diagnose check` (or `run`) in a process of its own, spread over a Dask
cluster with one GPU per task.

Takes files, folders of *.py and manifests (inputs.py), and the settings every submission shares; gives one row
per submission (task.py runs it and reads its session into the row; classes.py names its cause class) and the
Dask client that runs them (cluster.py). The CLI (cli/triage.py) submits the tasks, writes each row as it ends,
and renders the tables (output/triage.py). Only the tasks here spawn processes, as only the runner does for a
single diagnosis.
"""
