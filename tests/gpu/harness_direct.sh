#!/usr/bin/env bash
# Ground truth for a GPU MODE folder: its own eval.py run the way kernelbot's run_pytorch_script runs it, with
# no diagnose in between: the folder's `files` written into a fresh directory, `python3 submission.py`, then
# `python3 eval.py MODE cases.txt` with POPCORN_FD pointing at a report file. Prints the report.
#
#   bash tests/gpu/harness_direct.sh PROBLEM_DIR SUBMISSION MODE
set -u
dir=$1; sub=$2; mode=$3
work=$(mktemp -d)
python3 - "$dir" "$sub" "$mode" "$work" <<'PY'
import os, shutil, sys, yaml
d, sub, mode, work = sys.argv[1:]
doc = yaml.safe_load(open(os.path.join(d, "task.yml")))
for f in doc["files"]:
    src = sub if f["source"] == "@SUBMISSION@" else os.path.join(d, f["source"])
    shutil.copyfile(src, os.path.join(work, f["name"]))
cases = doc["tests"] if mode == "test" else doc["benchmarks"]
with open(os.path.join(work, "cases.txt"), "w") as fh:
    fh.write("".join("; ".join(f"{k}: {v}" for k, v in c.items()) + "\n" for c in cases))
PY
cd "$work" || exit 2
timeout 120 python3 submission.py > compile.log 2>&1; echo "compile step: exit $?"
exec 3> report.txt
POPCORN_FD=3 timeout 180 python3 eval.py "$mode" cases.txt > eval.log 2>&1; echo "eval.py $mode: exit $?"
exec 3>&-
cat report.txt
rm -rf "$work"
