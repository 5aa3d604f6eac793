"""The submission's source, before anything runs.

Takes a submission file (or two, for bisect); gives what the rest reads: the loaded Submission
(submission.py), how it binds names (bindings.py), every suspect's site from a static scan (scan/), the
static risks `check` shows (risks.py), and edits to the source: the probes' variants as diffs (edits.py)
and statement-level differences between two versions (ast_diff.py). Nothing here executes the submission.
"""
