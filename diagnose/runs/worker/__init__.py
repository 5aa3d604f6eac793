"""The child side: the only code of diagnose that imports torch.

`python -m diagnose.runs.worker SPEC.json` runs one harness stage of one submission and streams events as JSON
lines to the file the spec names (never stdout: the submission may print anything there).
"""
