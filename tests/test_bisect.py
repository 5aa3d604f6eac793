"""`diagnose bisect`: statement-level edits, ddmin over them, untestable combinations, bad ends; the
search through the CLI with the scripted runner (exact, no process), and once with real processes."""
import ast
import itertools
import json
from dataclasses import asdict

import pytest

from diagnose.source import ast_diff
from tests.builders import stage
from tests.conftest import EXAMPLES, FIXTURES as FIXTURES_DIR, cli

CONSTS = [f"K{i}" for i in range(10)]


def _pair(culprits=(), untestable=False):
    """GOOD and BAD that differ in 10 constants, the warmup count and the compile mode (each one edit),
    plus a renamed helper when `untestable` (the rename and its use are two edits: either alone breaks)."""
    good = ["import time", "import torch", "", "", "class H:", "    def run(self, data):", "        return data", "",
            "", "_H = H()"] + \
        [f"{c} = 1" for c in CONSTS] + ["WARMUP = 3", 'MODE = "default"', "", "",
                                        "def custom_kernel(data):", "    for _ in range(WARMUP):",
                                        "        data = data", "    return _H.run(data)", ""]
    bad = "\n".join(good)
    for c in CONSTS:
        bad = bad.replace(f"{c} = 1", f"{c} = 2")
    bad = bad.replace("WARMUP = 3", "WARMUP = 100").replace('MODE = "default"', 'MODE = "max-autotune"')
    if untestable:      # a method renamed, and its call: no name ties them, an attribute does
        bad = bad.replace("    def run(self, data):", "    def run_v2(self, data):").replace(
            "    return _H.run(data)", "    return _H.run_v2(data)")
    return "\n".join(good), bad


def _d(st) -> dict:
    return json.loads(json.dumps(asdict(st), default=str))


def _script(path, rules):
    runs = [{"match": m, "stages": [_d(s) for s in stages]} for m, stages in rules]
    path.write_text(json.dumps({"runs": runs, "default": [_d(stage("test", wall=2.0, budget=30))]}))
    return path


TIMEOUT = [stage("test", "timeout", wall=30.0, budget=30, phase="first_call:a", message="ran past its budget")]
CRASH = [stage("test", "crash", wall=3.0, budget=30, phase="first_call:a", message="Cannot prepare for replay")]
ATTRIBUTE_ERROR = [stage("test", "crash", wall=1.0, budget=30, phase="first_call:a", message="AttributeError",
                         exception={"type": "AttributeError", "message": "'H' object has no attribute 'run_v2'"})]


def _bisect(tmp_path, good, bad, rules, *extra, diagnose=False):
    (tmp_path / "good.py").write_text(good)
    (tmp_path / "bad.py").write_text(bad)
    script = _script(tmp_path / "script.json", rules)
    out = tmp_path / "out"
    res = cli("bisect", tmp_path / "good.py", tmp_path / "bad.py", "-s", "test", "-b", "30",
              *([] if diagnose else ["--no-diagnose"]), "--runner", f"scripted:{script}", "-o", out, *extra,
              env={"CI": "1"}, timeout=300)
    return res, out


def _found(out):
    return json.loads((out / "session.json").read_text())["edit_bisect"]


def test_every_subset_of_the_edits_applies_and_parses_and_all_of_them_are_bad():
    good, bad = _pair(untestable=True)
    edits = ast_diff.edits(good, bad)
    assert len(edits) == 14 and {e.kind for e in edits} == {"replace", "header"}
    # statically, nothing ties the method's rename to its call (an attribute): either alone is allowed
    assert not any(ast_diff.requirements(good, edits).values())
    assert ast_diff.apply(good, edits) == bad and ast_diff.apply(good, []) == good
    for r in (1, 2, 13):
        for sub in itertools.combinations(edits, r):
            ast.parse(ast_diff.apply(good, list(sub)))


def test_round9_against_its_baseline_is_nine_edits_that_rebuild_it_exactly():
    good, bad = (EXAMPLES / "baseline.py").read_text(), (EXAMPLES / "round9.py").read_text()
    edits = ast_diff.edits(good, bad)
    assert len(edits) == 9 and ast_diff.apply(good, edits) == bad
    assert any(e.kind == "insert" and "torch.compile(mode=\"max-autotune\"" in e.bad_text for e in edits)
    capture = next(e for e in edits if "output = _fused_silu_mul(r1, r2)" in e.summary())   # the capture's line
    compiled = next(e for e in edits if e.kind == "insert" and "torch.compile" in e.bad_text)
    needs = ast_diff.requirements(good, edits)
    assert ast_diff.closure([capture.id], needs) == sorted([capture.id, compiled.id], key=lambda x: int(x[1:]))
    # the class rename, the instance's rename and its use: any one of them brings the other two
    rename = [e.id for e in edits if "_santos_cache" in e.bad_text or "class _SantosGraphCache" in e.bad_text]
    assert len(rename) == 3 and all(ast_diff.closure([i], needs) == rename for i in rename)


@pytest.mark.e2e
def test_one_culprit_among_twelve_edits(tmp_path, audited):
    good, bad = _pair()
    res, out = _bisect(tmp_path, good, bad, [({"source_has": ["WARMUP = 100"]}, TIMEOUT)], diagnose=True)
    assert res.returncode == 0, res.stdout + res.stderr
    # then the usual diagnosis of GOOD with that edit, in diagnosis/, named at the top of the report
    assert (out / "diagnosis" / "report.md").exists() and (out / "minimal.py").read_text().count("WARMUP = 100") == 1
    assert "**Their diagnosis** (`diagnosis/report.md`): TIMEOUT" in (out / "report.md").read_text()
    b = _found(out)
    culprit = next(e["id"] for e in b["edits"] if "WARMUP = 100" in e["bad_text"])
    assert b["minimal"] == [culprit] and b["want"] == "timeout"
    assert b["runs"] < 2 ** 12 / 50, b["runs"]         # ddmin: tens of runs, not thousands
    print(f"one culprit: {b['runs']} runs of {b['exhaustive']}")
    assert f"FOUND the edits {culprit} alone" in res.stdout and "WARMUP = 3 -> WARMUP = 100" in res.stdout
    md = (out / "report.md").read_text()
    assert "### Tested combinations" in md and "+WARMUP = 100" in md


@pytest.mark.e2e
def test_two_edits_that_only_fail_together(tmp_path, audited):
    good, bad = _pair()
    res, out = _bisect(tmp_path, good, bad, [({"source_has": ['MODE = "max-autotune"', "K7 = 2"]}, CRASH)])
    assert res.returncode == 0, res.stdout + res.stderr
    b = _found(out)
    both = sorted((e["id"] for e in b["edits"] if "max-autotune" in e["bad_text"] or "K7 = 2" in e["bad_text"]),
                  key=lambda x: int(x[1:]))
    assert b["minimal"] == both and b["want"] == "crash"
    print(f"two together: {b['runs']} runs of {b['exhaustive']}")
    alone = [r for r in b["rows"] if len(r["applied"]) == 1 and r["applied"][0] in both]
    assert all(r["decision"] == "pass" for r in alone) or not alone


@pytest.mark.e2e
def test_an_edit_that_breaks_the_program_alone_is_untestable_never_a_pass_or_a_failure(tmp_path, audited):
    good, bad = _pair(untestable=True)
    rules = [({"source_has": ["_H.run_v2("], "source_lacks": ["def run_v2"]}, ATTRIBUTE_ERROR),
             ({"source_has": ["def run_v2"], "source_lacks": ["_H.run_v2("]}, ATTRIBUTE_ERROR),
             ({"source_has": ["WARMUP = 100"]}, TIMEOUT)]
    res, out = _bisect(tmp_path, good, bad, rules)
    assert res.returncode == 0, res.stdout + res.stderr
    b = _found(out)
    culprit = next(e["id"] for e in b["edits"] if "WARMUP = 100" in e["bad_text"])
    assert b["minimal"] == [culprit]
    broken = [r for r in b["rows"] if r["decision"] == "untestable"]
    assert broken and all("AttributeError" in r["note"] for r in broken)
    print(f"untestable beside the culprit: {b['runs']} runs of {b['exhaustive']}")


@pytest.mark.e2e
@pytest.mark.parametrize("which", ["good", "bad"])
def test_a_good_that_fails_or_a_bad_that_passes_is_one_error_line(tmp_path, which):
    good, bad = _pair()
    rule = ({"source_lacks": ["WARMUP = 100"]}, TIMEOUT) if which == "good" else ({"source_has": ["nothing"]}, TIMEOUT)
    res, _ = _bisect(tmp_path, good, bad, [rule])
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    want = "GOOD does not pass here: it ended timeout in test" if which == "good" else "BAD does not fail here"
    assert want in res.stderr, res.stderr


@pytest.mark.e2e
def test_versions_that_do_not_differ_and_a_missing_bad_are_bad_input(tmp_path):
    good, _ = _pair()
    (tmp_path / "a.py").write_text(good)
    (tmp_path / "b.py").write_text(good.replace("import time", "import time  # a comment"))
    res = cli("bisect", tmp_path / "a.py", tmp_path / "b.py", "-o", tmp_path / "o")
    assert res.returncode == 2 and "do not differ in any statement" in res.stderr, res.stderr
    res = cli("bisect", tmp_path / "a.py", "-o", tmp_path / "o2")
    assert res.returncode == 2 and "needs GOOD and BAD" in res.stderr, res.stderr


@pytest.mark.e2e
def test_real_runs_find_the_slow_warmup_among_three_edits(tmp_path, audited):
    """The same search with real processes: GOOD is a correct kernel; BAD also names its result, changes the
    docstring and warms up with a 1 s pause per call. Only the warmup (with its import) fails."""
    good = (FIXTURES_DIR / "healthy.py").read_text()
    bad = good.replace('"""A correct FP8 dual GEMM, no tricks."""', '"""A correct FP8 dual GEMM, now warmed up."""')
    bad = bad.replace("import torch\n", "import time\nimport torch\n")
    bad = bad.replace("    a, b1, b2, sa, sb1, sb2 = data\n",
                      "    a, b1, b2, sa, sb1, sb2 = data\n    for _ in range(40):\n        time.sleep(1)\n")
    bad = bad.replace("return (F.silu(r1) * r2).half()", "out = (F.silu(r1) * r2).half()\n    return out")
    (tmp_path / "good.py").write_text(good)
    (tmp_path / "bad.py").write_text(bad)
    out = tmp_path / "out"
    res = cli("bisect", tmp_path / "good.py", tmp_path / "bad.py", "-s", "test", "-b", "10", "--no-diagnose",
              "-o", out, env={"CI": "1"}, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    b = _found(out)
    loop = next(e["id"] for e in b["edits"] if "time.sleep(1)" in e["bad_text"])
    imp = next(e["id"] for e in b["edits"] if e["bad_text"].strip() == "import time")
    # the loop reads a name only the import defines: it is never tried without it
    assert b["minimal"] == [imp, loop] and b["want"] == "timeout", b
    assert next(e for e in b["edits"] if e["id"] == loop)["needs"] == [imp]
    assert not any(r["applied"] == [loop] for r in b["rows"])
    assert not any(r["decision"] == "untestable" for r in b["rows"])
    assert b["runs"] <= 16, b["runs"]
    print(f"real runs: {b['runs']} of {b['exhaustive']}")


@pytest.mark.e2e
def test_both_versions_from_git(tmp_path):
    import subprocess
    good, bad = _pair()
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    for text, msg in ((good, "good"), (bad, "bad")):
        (repo / "sub.py").write_text(text)
        subprocess.run(git + ["add", "sub.py"], check=True)
        subprocess.run(git + ["commit", "-qm", msg], check=True)
    script = _script(tmp_path / "script.json", [({"source_has": ["WARMUP = 100"]}, TIMEOUT)])
    out = tmp_path / "out"
    res = cli("bisect", "--git", "HEAD~1..HEAD", repo / "sub.py", "-s", "test", "-b", "30", "--no-diagnose",
              "--runner", f"scripted:{script}", "-o", out, env={"CI": "1"}, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (out / "good.py").read_text() == good and (out / "bad.py").read_text() == bad
    assert "WARMUP = 3 -> WARMUP = 100" in res.stdout
    res = cli("bisect", "--git", "HEAD", repo / "sub.py", "-o", tmp_path / "o2")
    assert res.returncode == 2 and "--git must be REV_GOOD..REV_BAD" in res.stderr, res.stderr
