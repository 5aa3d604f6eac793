#!/usr/bin/env bash
# One batched session on a GPU machine: the seed scenarios through `diagnose run`, results packed into
# $OUT/results.tgz (the machine returns few files). Usage: bash tests/gpu/device_batch.sh [what...]
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=${OUT:-/tmp/out}/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$R/gpu.txt"
python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)' | tee -a "$R/gpu.txt"
for what in "$@"; do
  case $what in
    baseline-run) cmd=(run examples/baseline.py --probes none) ;;
    round9-run) cmd=(run examples/round9.py --probes none) ;;
    round9) cmd=(run examples/round9.py) ;;
    recompile-storm) cmd=(run tests/fixtures/gpu/recompile_storm.py --stages test,benchmark --budget 60) ;;
    baseline) cmd=(run examples/baseline.py) ;;
    pytest) (timeout 420 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=10 2>&1 | tail -40) | tee "$R/pytest.txt"; continue ;;
    pytest:*) (timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider -k "${what#pytest:}" 2>&1 | tail -60) | tee -a "$R/pytest.txt"; continue ;;
    bench:*) (cd "$PWD" && OUT="$R" timeout 590 python3 tests/perf/bench.py "${what#bench:}" 2>&1 | tail -30) | tee -a "$R/bench.txt"; continue ;;
    *) echo "unknown $what"; continue ;;
  esac
  t0=$(date +%s.%N)
  # relative --out: the recorded command and paths carry no machine's directory layout
  mkdir -p reports/examples
  timeout 560 python3 -m diagnose "${cmd[@]}" --out "reports/examples/$what" > "$R/$what.stdout" 2> "$R/$what.stderr"
  rc=$?
  t1=$(date +%s.%N)
  echo "$what rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))")" | tee -a "$R/summary.txt"
  tail -15 "$R/$what.stdout"
done
nvidia-smi --query-gpu=memory.used --format=csv | tee -a "$R/gpu.txt"
mkdir -p reports/examples
tar czf "${OUT:-/tmp/out}/results.tgz" -C "$R/.." r -C "$PWD" reports/examples
