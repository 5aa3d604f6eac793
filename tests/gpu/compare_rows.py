"""Two triages' rows for the same files, compared field by field (what a row concludes, not its timings): does a
triage with hostile files beside them conclude for every other file what it concludes without them? Also prints
what each file of the first triage that the second lacks tried, from its session.

    python tests/gpu/compare_rows.py WITH/triage.jsonl WITHOUT/triage.jsonl
"""
import json
import sys
from pathlib import Path

FIELDS = ("status", "class", "stage", "phase", "line", "cause", "fix", "leaderboard", "problem")


def rows(path: str) -> dict[str, dict]:
    out = {}
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        out[Path(r["file"]).name] = r
    return out


with_, without = rows(sys.argv[1]), rows(sys.argv[2])
same = 0
for name, r in sorted(without.items()):
    other = with_.get(name)
    if other is None:
        print(f"{name}: MISSING from the triage with hostile files")
        continue
    diff = {f: (other.get(f), r.get(f)) for f in FIELDS if other.get(f) != r.get(f)}
    same += not diff
    print(f"{name}: {'same' if not diff else 'DIFFERS ' + json.dumps(diff)} ({r['status']}, {other.get('wall_s')} s "
          f"with, {r.get('wall_s')} s without)")
for name in sorted(set(with_) - set(without)):
    r = with_[name]
    session = Path(sys.argv[1]).parent / (r.get("report") or "-") / "session.json"
    tried = json.loads(session.read_text())["harness"]["container"].get("tried") if session.is_file() else None
    print(f"{name} (hostile): {r['status']}: {r.get('why')}; tried: {tried}")
print(f"{same} of {len(without)} rows the same with the hostile files beside them")
