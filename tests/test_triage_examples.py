"""The two-card triage measured on an H100 pair (reports/examples/triage-2gpu): its rows, derived again from the
sessions each command saved, are the rows of one card, and no card ran two tasks at once."""
from __future__ import annotations

import json
from itertools import pairwise

from diagnose.triage.rows import row_of
from tests.conftest import ROOT

EXAMPLE = ROOT / "reports" / "examples" / "triage-2gpu"
SAME = ("leaderboard", "problem", "status", "class", "line", "fix")


def _saved(name: str) -> dict[str, dict]:
    rows = [json.loads(x) for x in (EXAMPLE / name / "triage.jsonl").read_text().splitlines()]
    return {r["file"]: r for r in rows}


def _derived(name: str) -> dict[str, dict]:
    """Each row again from its command's session and exit code, by today's rows.py."""
    out = {}
    for f, r in _saved(name).items():
        item = {"report_dir": str(EXAMPLE / name / r["report"]), "shown": f, "key": r["key"]}
        out[f] = row_of(item, {}, r["exit_code"], "", "", r["wall_s"], None, gpu=r["gpu"]).to_dict()
    return out


def test_two_cards_give_the_rows_of_one():
    """The two runs' own jsonl differed in one line: recompile_storm's deadline landed in the harness's clone of
    the inputs on two cards (no line of the file on the stack), in Dynamo at L24 on one. The row's line is the
    top cause's, where the time went: L24 both times."""
    one, two = _derived("one"), _derived("two")
    assert len(one) == 10 and one.keys() == two.keys()
    assert {f: [r[k] for k in SAME] for f, r in one.items()} == {f: [r[k] for k in SAME] for f, r in two.items()}
    assert _saved("one")["tests/fixtures/gpu/recompile_storm.py"]["line"] == 24
    assert _saved("two")["tests/fixtures/gpu/recompile_storm.py"]["line"] is None      # what the jsonl said then
    assert two["tests/fixtures/gpu/recompile_storm.py"]["line"] == 24
    # the stage and phase too, but for one check whose 5-repeat benchmark sample could not say (its prediction
    # reached past the budget in a different stage each time: sampling, not the card)
    for f in one:
        if one[f]["status"] != "inconclusive":
            assert (one[f]["stage"], one[f]["phase"]) == (two[f]["stage"], two[f]["phase"]), f
    assert {r["leaderboard"] for r in one.values()} >= {"vectoradd_v2", "conv2d_v2", "matmul_v2", "vectorsum_v2"}


def test_each_card_ran_one_task_at_a_time_and_the_pinned_file_saw_one_card():
    for name, cards in (("one", {"0"}), ("two", {"0", "1"})):
        rows = _saved(name)
        assert {r["gpu"] for r in rows.values()} == cards
        for card in cards:
            spans = sorted((r["started_at"], r["ended_at"]) for r in rows.values() if r["gpu"] == card)
            assert all(b[0] >= a[1] for a, b in pairwise(spans)), (name, card, spans)
        # it raises at import if it sees any count but one: it got past import into the benchmark
        seen = rows["tests/fixtures/gpu/sees_one_gpu.py"]
        assert seen["status"] != "crash" and seen["stage"] in ("benchmark", "leaderboard"), seen
    # the scaling: one card's wall over twice the two cards' (from submission to the last end)
    wall = {n: max(r["ended_at"] for r in _saved(n).values()) - min(r["started_at"] for r in _saved(n).values())
            for n in ("one", "two")}
    assert wall["one"] / (2 * wall["two"]) > 0.9, wall
