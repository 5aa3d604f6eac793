"""Renderers: one module per output format, each `render(session) -> str`. They read only the session."""
from diagnose.renderers import json_out, markdown, trace

RENDERERS = {"md": markdown.render, "json": json_out.render, "trace": trace.render}
