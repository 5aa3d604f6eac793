"""Problem definitions: where a run's inputs, checks and shapes come from.

A task is a GPU MODE-style problem directory (reference.py, task.yml, optional task.py and helpers).
The built-in `fp8-dual-gemm` is such a directory shipped inside the package, so the bundled task and a
user's `--problem DIR` take exactly the same path through the tool.
"""
