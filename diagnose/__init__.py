"""diagnose: why does a GPU kernel submission time out or crash? Measured, not guessed.

Data flow, one module or package per step:
  submission.py (validated input) -> scan/ (suspects in the source) -> probes/ (variants) ->
  runner/ (isolated child runs; worker/ is the child) -> session.py (everything measured) ->
  bisector.py (ranked causes, verified fix) -> renderers/ (Markdown, JSON, trace, console).
The parent process never imports torch; only diagnose.runs.worker does, inside the child.
"""
__version__ = "0.1.0"
