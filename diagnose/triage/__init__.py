"""Triage: many submissions at once, each `diagnose check` (or `run`) in a process of its own, spread over a Dask
cluster with one GPU per task.

Takes files, folders of *.py and manifests, and each child command's flags (the CLI's record of the options,
written as argv); gives one row per submission as its task ends. inputs.py makes the items, ledger.py their keys,
what a triage before already did and each row's signed line; controller.py starts (or joins) the cluster
(cluster.py), submits the tasks and yields the rows; task.py runs one and rows.py reads its session into a row,
classes.py naming its cause class; stopping.py stops it all. The CLI (cli/triage.py) writes each row as it is
yielded and renders the tables (output/triage.py): nothing here writes a file. Only the tasks here spawn
processes, as only the runner does for a single diagnosis.
"""
