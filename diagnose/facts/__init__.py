"""Facts derived from a run's records, one layer below both the probes and the analysis.

Takes the run records (session.py) and gives what a run observed (observed.py: compiles, loops,
import work), what it measured (measures.py: steady-state µs, recompiles, first calls, the noise floor), and the
calls a loop's count is worked out by (count_calls.py: what an edit of that count also takes away).
Probes plan from these; the analysis concludes from them; neither is imported here.
"""
