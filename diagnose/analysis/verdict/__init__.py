"""What a session's runs show, and its verdict: the layer every other part of the analysis reads.

Takes a Session and its runs (the records, the runs' models, the facts); gives the measures and judgements the rest
builds on: whether a run reached the submission (started.py), how far a stage is from its budget (too_far.py), what
a run's timing can support (evidence.py), state kept between a run's processes (carried.py), where the time went
(hotspots.py), how a variant compares with the baseline (comparison.py), the GPU a pass is meant for (target.py),
and the numbers and verdict a report shows (summary.py). Imports nothing of the other analysis subpackages.
"""
