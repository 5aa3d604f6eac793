"""The child side: the only code of diagnose that imports torch.

`python -m diagnose.runs.worker SPEC.json` runs one harness stage of one submission and streams events on a
pipe it inherited (never stdout: the submission may print anything there). It ends through the
interpreter's normal exit, as `python3` does for the harness.
"""
import sys

from diagnose.runs.worker.main import main

sys.exit(main(sys.argv[1]))
