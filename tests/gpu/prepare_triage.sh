#!/usr/bin/env bash
# Run on a machine with network, before triaging on a GPU machine without one: what that machine lacks, in two
# folders git ignores (.problems/ and .whl-dask/), to copy there with the working tree.
#   bash tests/gpu/prepare_triage.sh REFERENCE_KERNELS_CHECKOUT
# - .problems/rk: the checkout's problems/ (the folders and their eval.py, the leaderboards' yaml)
# - .problems/triage/: reference-kernels' own solutions, each with the #!POPCORN header a submitter adds, so one
#   --problems-root resolves every file's folder (tests/gpu/triage_set.txt lists them with our own fixtures)
# - .whl-dask/: dask and distributed with the dependencies the GPU image lacks, as wheels for its Python 3.12
set -euo pipefail
src=${1:?a reference-kernels checkout}
mkdir -p .problems/triage .whl-dask
rm -rf .problems/rk && cp -r "$src/problems" .problems/rk
header() { printf '#!POPCORN leaderboard %s\n#!POPCORN gpu H100\n' "$1"; cat "$2"; }
p=.problems/rk/pmpp_v2
header vectoradd_v2 $p/vectoradd_py/solutions/correct/submission_cuda_inline.py > .problems/triage/vectoradd_inline.py
header vectoradd_v2 $p/vectoradd_py/solutions/correct/submission_triton.py > .problems/triage/vectoradd_triton.py
header vectorsum_v2 $p/vectorsum_py/solutions/correct/pytorch.py > .problems/triage/vectorsum_torch.py
header matmul_v2 $p/matmul_py/solutions/wrong/low-precision.py > .problems/triage/matmul_low_precision.py
header conv2d_v2 $p/conv2d_py/solutions/correct/ref.py > .problems/triage/conv2d_ref.py
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
  --implementation cp -d .whl-dask "dask[distributed]==$(python3 -c 'import dask; print(dask.__version__)')"
ls .problems/triage .whl-dask | wc -l
