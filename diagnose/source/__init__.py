"""The submission's source, before anything runs.

Takes a submission file (or two, for bisect); gives what the rest reads: the loaded Submission
(submission.py), how it binds names (bindings.py), the static scan (scan/: the compile and config sites every
suspect shares, and the Scanner each probe's own finder adds its sites with), and edits to the source: the
probes' variants as diffs (edits.py)
and statement-level differences between two versions (ast_diff.py). Nothing here executes the submission.
"""
