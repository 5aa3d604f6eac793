"""Isolated runs: the only package that spawns processes. Parent side; never imports torch."""
