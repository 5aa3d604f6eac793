"""Facts derived from a run's records, one layer below both the probes and the analysis.

Takes the run records (session.py) and gives what a run observed (observed.py: compiles, captures, loops,
import work) and what it measured (measures.py: steady-state µs, recompiles, first calls, the noise floor).
Probes plan from these; the analysis concludes from them; neither is imported here.
"""
