"""session.json: the machine-readable contract (schema_version, verdict, runs, causes, fix, ...), with the
claims the report states (derived: a reader of the session ignores them and derives them again)."""
import json
from dataclasses import asdict

from diagnose.analysis.audit import claims
from diagnose.session import Session


def render(session: Session, cl: list[claims.Claim] | None = None) -> str:
    data = session.to_dict()       # a copy already: adding the claims leaves the session as it was
    data["claims"] = [asdict(c) for c in (claims.derive(session) if cl is None else cl)]
    return json.dumps(data, indent=1, default=str) + "\n"
