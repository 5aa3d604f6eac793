"""Isolated runs: the only package that spawns processes. Parent side; never imports torch."""
from pathlib import Path

# The directory that holds the diagnose package: on the child's PYTHONPATH, and shortened in its stacks.
TOOL_ROOT = str(Path(__file__).resolve().parent.parent.parent)
