"""What the runs show: facts derived from a Session, and the conclusions drawn from them.

Takes a Session (its ended runs; the engine asks again as more end); gives measures, findings and
conclusions. One calling convention: each function takes the Session (and the Run or StageResult it is
about) and returns a new value (a number, a list of records, a finding), never changing its arguments.
The exceptions are the bisector's two entry points: minimal_set(session, ...) records the search in
session.bisection, and conclude(session) fills the session's causes, cleared, inconclusive and fix.
Nothing here runs a process, reads a file or imports torch.

Measures (measures.py), what a stage did (observed.py), where time went (hotspots.py), whether a run's
timing can be trusted (evidence.py), whether a run reached the submission at all (started.py), how a variant
compares with the baseline (comparison.py), state kept between a run's steps (carried.py), the verdict
(summary.py), causes and the fix (bisector.py, fix_choice.py, unfixed.py, findings.py), and the claims a report
makes with the rules that admit them (claims.py, audit.py).
"""
