"""Static risks for the pre-submit check, from the scan alone (no run needed)."""
from __future__ import annotations

GRAPH_MODES = {"max-autotune", "reduce-overhead"}


def static_risks(scan: list[dict]) -> list[dict]:
    out = []
    modes = {s["details"]["target"]: s["details"]["mode"] for s in scan if s["suspect"] == "compile"}
    for s in scan:
        d = s["details"]
        if s["suspect"] == "capture" and d.get("calls_compiled"):
            bad = [f for f in d["calls_compiled"] if modes.get(f) in GRAPH_MODES]
            if bad:
                out.append({"line": s["line"], "severity": "error", "message":
                            f"CUDA graph capture around {', '.join(bad)}, compiled with a mode that records its own "
                            f"CUDA graphs: fails inside the capture ('Cannot prepare for replay during capturing "
                            f"stage') or hangs"})
            else:
                out.append({"line": s["line"], "severity": "warning", "message":
                            f"CUDA graph capture around compiled {', '.join(d['calls_compiled'])}: works only if "
                            f"compiled and warmed up before the capture"})
        elif s["suspect"] == "import_init" and d.get("calls_compiled"):
            out.append({"line": s["line"], "severity": "warning", "message":
                        "compiles at import: every stage's fresh process pays it again"})
        elif s["suspect"] == "compile" and d.get("mode") in ("max-autotune", "max-autotune-no-cudagraphs"):
            out.append({"line": s["line"], "severity": "warning", "message":
                        f"mode={d['mode']} autotunes per shape, cold in every new container"})
    return out
