"""session.json: the machine-readable contract (schema_version, verdict, runs, causes, fix, ...)."""
from diagnose.session import Session


def render(session: Session) -> str:
    return session.to_json() + "\n"
