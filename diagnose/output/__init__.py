"""Renderers: one module per output format, each `render(session, cl=None) -> str` (`cl`: the claims as the
engine settled them, derived again where None), plus the end-of-run console tables. Takes a concluded Session;
gives text. They read only the session: nothing here writes a file, runs anything or decides an exit code (that is
the CLI's)."""
from diagnose.output import json_out, markdown, trace

RENDERERS = {"md": markdown.render, "json": json_out.render, "trace": trace.render}
