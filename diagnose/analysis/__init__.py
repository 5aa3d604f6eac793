"""What the runs show: facts derived from a Session, and the conclusions drawn from them.

Takes a Session (its ended runs; the engine asks again as more end); gives measures, findings and
conclusions. One calling convention: each function takes the Session (and the Run or StageResult it is
about) and returns a new value (a number, a list of records, a finding), never changing its arguments.
The exceptions are the bisector's two entry points: minimal_set(session, ...) records the search in
session.bisection, and conclude(session) fills the session's causes, cleared, inconclusive and fix.
Nothing here runs a process, reads a file or imports torch.

Four subpackages, by what each decides, each importing only those before it (tests/test_structure.py):
verdict/ (what the runs show and the verdict), effects/ (what each toggle changed), causes/ (the causes, the
cleared suspects and the fix), audit/ (the claims a report makes, and the audit that checks them).
"""
