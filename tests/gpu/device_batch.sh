#!/usr/bin/env bash
# One batched session on a GPU machine. Each part runs under its own time limit; results (sessions,
# reports, logs) go to $OUT/r and are packed into $OUT/results.tgz after every part, so a part that
# runs out of time loses nothing that came before it.
#
#   bash tests/gpu/device_batch.sh PART...
#   PART: bench:cold,default | bench:sampler | example:NAME (a committed example report, see below; hooks-*: the
#         probes' worker hooks once they moved into their packages, each beside the example it repeats) |
#         triage:NAME:GPUS (tests/gpu/triage_set.txt at --budget $TRIAGE_BUDGET, default 60, into reports/examples/NAME) | alone:NAME (its checks, in turn) |
#         pytest:EXPR | problem:DIR:SUBMISSION:STAGES:NAME (a GPU MODE folder under .problems/) |
#         home:LABEL (a listing with checksums of this machine's ~/.cache/torch_extensions, to compare) |
#         boundary:x (two cards: six files with two hostile ones beside them, and the six alone; their rows compared) |
#         forgers:x (two cards: the triage set with two forgers beside it, and the set alone; their rows compared)
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=${OUT:-/tmp/out}/r; mkdir -p "$R" reports/examples
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$R/gpu.txt"
python3 -c 'import torch, triton, sys; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "python", sys.version.split()[0])' | tee -a "$R/gpu.txt"
# Helion travels as wheels (.whl, carried): installed into the image's own environment, as a package of it
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl 2>&1 | tail -2
  python3 -c 'import helion, importlib.metadata as m; print("helion", m.version("helion"))' | tee -a "$R/gpu.txt"
fi
# Dask travels as wheels too (.whl-dask, made by tests/gpu/prepare_triage.sh): only what the image lacks is installed
if ls .whl-dask/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --find-links .whl-dask "dask[distributed]" 2>&1 | tail -2
  python3 -c 'import distributed; print("distributed", distributed.__version__)' | tee -a "$R/gpu.txt"
fi
pack() { tar czf "${OUT:-/tmp/out}/results.tgz" -C "$R/.." r; }
example() {   # committed example reports: the command that makes each
  case $1 in
    round9) echo "run examples/round9.py" ;;
    baseline) echo "run examples/baseline.py" ;;
    recompile-storm) echo "run tests/fixtures/gpu/recompile_storm.py --stages test,benchmark --budget 60" ;;
    capture-closure-method) echo "run tests/fixtures/gpu/capture_closure_method.py --stages test" ;;
    reduce-overhead-capture) echo "run tests/fixtures/gpu/reduce_overhead_capture.py --stages test" ;;
    named-warmup-capture) echo "run tests/fixtures/gpu/named_warmup_capture.py --stages test --budget 20" ;;
    gpu-hang) echo "run tests/fixtures/gpu/gpu_hang.py --probes none --stages test --budget 25" ;;
    pool-worker-exit) echo "run tests/fixtures/gpu/pool_worker_exit.py --stages test" ;;
    inline-cuda|inline-cuda-again) echo "run tests/fixtures/gpu/inline_cuda.py --stages compile,test --probes none" ;;
    inline-cuda-killed) echo "run tests/fixtures/gpu/inline_cuda.py --stages compile,test --compile-budget 20 --budget 45" ;;
    inline-cuda-covered) echo "run tests/fixtures/gpu/inline_cuda.py --stages compile,test --budget 45" ;;
    conv2d-correct) echo "run .problems/pmpp_v2/conv2d_py/solutions/correct/ref.py --problem .problems/pmpp_v2/conv2d_py --stages compile,test" ;;
    triton-autotune|hooks-autotune) echo "run tests/fixtures/gpu/triton_autotune.py --stages compile,test,benchmark --budget 60" ;;
    hooks-capture) echo "run tests/fixtures/gpu/capture_closure_method.py --stages test" ;;
    hooks-recompile) echo "run tests/fixtures/gpu/recompile_storm.py --stages test,benchmark --budget 60" ;;
    hooks-numerics) echo "check .problems/triage/matmul_low_precision.py --problems-root .problems/rk --budget 45" ;;
    triton-autotune-near-budget) echo "run tests/fixtures/gpu/triton_autotune.py --stages compile,test,benchmark --budget 20" ;;
    triton-autotune-at-budget) echo "run tests/fixtures/gpu/triton_autotune.py --stages compile,test,benchmark --budget 13" ;;
    inline-cuda-lazy) echo "run tests/fixtures/gpu/inline_cuda_lazy.py --stages compile,test,benchmark --budget 45" ;;
    triton-key-churn) echo "run tests/fixtures/gpu/triton_key_churn.py --stages compile,test,benchmark --budget 60" ;;
    triton-float-key) echo "run tests/fixtures/gpu/triton_float_key.py --stages compile,test,benchmark --budget 60" ;;
    popcorn-grayscale) echo "check tests/fixtures/popcorn/grayscale.py --problems-root .problems/rk" ;;
    popcorn-vectoradd) echo "check tests/fixtures/popcorn/vectoradd.py --problems-root .problems/rk" ;;
    popcorn-conv2d-b200) echo "check tests/fixtures/popcorn/conv2d_b200.py --problems-root .problems/rk" ;;
    hand-search-triton) echo "run tests/fixtures/gpu/hand_search_triton.py --small --stages compile,test,benchmark --budget 12" ;;
    dobench-static-tuple) echo "run tests/fixtures/gpu/dobench_static_tuple.py --small --stages compile,test,benchmark --budget 12" ;;
    dobench-static-lru) echo "run tests/fixtures/gpu/dobench_static_lru.py --small --stages compile,test,benchmark --budget 12" ;;
    helion-no-config) echo "run tests/fixtures/gpu/helion_no_config.py --small --stages compile,test,benchmark --budget 40" ;;
    helion-configs-list) echo "run tests/fixtures/gpu/helion_fp8_quant_configs.py --problem .problems/helion/fp8_quant_py --stages compile,test,benchmark --budget 80" ;;
    helion-fp8-quant) echo "run tests/fixtures/gpu/helion_fp8_quant_no_config.py --problem .problems/helion/fp8_quant_py --stages compile,test" ;;
    helion-causal-conv1d) echo "run tests/fixtures/gpu/helion_causal_conv1d_no_config.py --problem .problems/helion/causal_conv1d_py --stages compile,test" ;;
  esac
}
for part in "$@"; do
  t0=$(date +%s)
  case $part in
    bench:*) OUT="$R" BENCH_TIMEOUT=330 timeout 560 python3 tests/perf/bench.py "${part#bench:}" > "$R/bench-${part#bench:}.txt" 2>&1
             rc=$?; tail -25 "$R/bench-${part#bench:}.txt" ;;
    example:*) name=${part#example:}
               # a relative --out: the recorded command and paths carry no machine's directory layout
               timeout "${EX_TIMEOUT:-400}" python3 -m diagnose $(example "$name") --out "reports/examples/$name" > "$R/$name.txt" 2>&1
               rc=$?; mkdir -p "$R/$name"; cp reports/examples/$name/session.json reports/examples/$name/report.md "$R/$name/" 2>/dev/null
               head -12 "$R/$name.txt" ;;
    pytest:*) timeout 400 python3 -m pytest -m gpu -q -p no:cacheprovider -k "${part#pytest:}" > "$R/pytest.txt" 2>&1
              rc=$?; tail -15 "$R/pytest.txt" ;;
    problem:*) IFS=: read -r _ dir sub stages name <<< "$part"
               timeout 400 python3 -m diagnose run ".problems/$dir/$sub" --problem ".problems/$dir" --probes none \
                 --stages "$stages" --out "reports/examples/$name" > "$R/$name.txt" 2>&1
               rc=$?; mkdir -p "$R/$name"; cp reports/examples/$name/session.json reports/examples/$name/report.md "$R/$name/" 2>/dev/null
               head -8 "$R/$name.txt" ;;
    direct:*) IFS=: read -r _ dir sub mode <<< "$part"     # a folder's own eval.py, as the harness runs it
              bash tests/gpu/harness_direct.sh ".problems/$dir" ".problems/$dir/$sub" "$mode" > "$R/direct-$mode.txt" 2>&1
              rc=$?; cat "$R/direct-$mode.txt" | head -30 ;;
    both:*) IFS=: read -r _ a b <<< "$part"     # two examples side by side (no timing of theirs is compared)
            for n in $a $b; do (timeout "${EX_TIMEOUT:-400}" python3 -m diagnose $(example "$n") --out "reports/examples/$n" > "$R/$n.txt" 2>&1; mkdir -p "$R/$n"; cp reports/examples/$n/session.json reports/examples/$n/report.md "$R/$n/" 2>/dev/null) & done
            wait; rc=$?; tail -4 "$R/$a.txt" "$R/$b.txt" ;;
    triage:*) IFS=: read -r _ name gpus <<< "$part"     # tests/gpu/triage_set.txt triaged on these GPUs
              # 480 s, inside a call's 600 s with the setup: what it wrote is copied back either way
              timeout 480 python3 -m diagnose triage $(cat tests/gpu/triage_set.txt) --problems-root .problems/rk \
                --budget "${TRIAGE_BUDGET:-60}" ${gpus:+--gpus "$gpus"} --out "reports/examples/$name" > "$R/$name.txt" 2>&1
              rc=$?; mkdir -p "$R/$name"; cp -r reports/examples/$name/. "$R/$name/" 2>/dev/null; tail -3 "$R/$name.txt" ;;
    boundary:*) # six files of the triage set with two hostile ones on card 0, the six alone on card 1, at once
             files=".problems/triage/vectoradd_triton.py .problems/triage/vectorsum_torch.py .problems/triage/matmul_low_precision.py .problems/triage/conv2d_ref.py tests/fixtures/gpu/triton_autotune.py tests/fixtures/gpu/illegal_access.py"
             h=reports/examples/triage-hostile; c=reports/examples/triage-without-hostile; mkdir -p .problems/hostile
             # the forger is told the triage's out folder: a file that guessed it right must still reach nothing
             sed "s#__OUT__#$PWD/$h#" tests/fixtures/triage_hostile/forger_vectoradd.py > .problems/hostile/forger.py
             cp tests/fixtures/triage_hostile/killer_vectoradd.py .problems/hostile/killer.py
             timeout 520 python3 -m diagnose triage $files .problems/hostile/forger.py .problems/hostile/killer.py \
               --problems-root .problems/rk --budget "${TRIAGE_BUDGET:-45}" --gpus 0 --out "$h" > "$R/hostile.txt" 2>&1 &
             timeout 520 python3 -m diagnose triage $files --problems-root .problems/rk --budget "${TRIAGE_BUDGET:-45}" \
               --gpus 1 --out "$c" > "$R/without.txt" 2>&1 &
             wait; rc=$?; tail -n 4 "$R/hostile.txt" "$R/without.txt"
             python3 tests/gpu/compare_rows.py "$h/triage.jsonl" "$c/triage.jsonl" | tee "$R/compare.txt"
             mkdir -p "$R/triage-hostile" "$R/triage-without-hostile"; cp -r $h/. "$R/triage-hostile/"; cp -r $c/. "$R/triage-without-hostile/" ;;
    forgers:*) # the triage set with two forgers beside it on card 0, the set alone on card 1, at once: every real
             # file's row must be what it is without them, and no forger's row ok (the verdict is the verifier's)
             h=reports/examples/triage-forgers; c=reports/examples/triage-without-forgers
             timeout 500 python3 -m diagnose triage $(cat tests/gpu/triage_set.txt) \
               tests/fixtures/triage_hostile/zeros_isclose_vectoradd.py tests/fixtures/triage_hostile/match_replaced_vectoradd.py \
               --problems-root .problems/rk --budget "${TRIAGE_BUDGET:-45}" --gpus 0 --out "$h" > "$R/forgers.txt" 2>&1 &
             timeout 500 python3 -m diagnose triage $(cat tests/gpu/triage_set.txt) --problems-root .problems/rk \
               --budget "${TRIAGE_BUDGET:-45}" --gpus 1 --out "$c" > "$R/without-forgers.txt" 2>&1 &
             wait; rc=$?; tail -n 4 "$R/forgers.txt" "$R/without-forgers.txt"
             python3 tests/gpu/compare_rows.py "$h/triage.jsonl" "$c/triage.jsonl" | tee "$R/compare-forgers.txt"
             mkdir -p "$R/triage-forgers" "$R/triage-without-forgers"; cp -r $h/. "$R/triage-forgers/"; cp -r $c/. "$R/triage-without-forgers/" ;;
    forgers2:*) gpus=${part#forgers2:}     # the set and the two forgers in one triage over these GPUs
             h=reports/examples/triage-forgers
             timeout 520 python3 -m diagnose triage $(cat tests/gpu/triage_set.txt) \
               tests/fixtures/triage_hostile/zeros_isclose_vectoradd.py tests/fixtures/triage_hostile/match_replaced_vectoradd.py \
               --problems-root .problems/rk --budget "${TRIAGE_BUDGET:-45}" --gpus "$gpus" --out "$h" > "$R/forgers.txt" 2>&1
             rc=$?; tail -n 3 "$R/forgers.txt"; mkdir -p "$R/triage-forgers"; cp -r $h/. "$R/triage-forgers/" ;;
    alone:*) name=${part#alone:}     # the same set's checks one after another, outside Dask: the sum triage is held to
             end=$(( $(date +%s) + 480 )); rc=0
             for f in $(cat tests/gpu/triage_set.txt); do
               left=$(( end - $(date +%s) )); if [ "$left" -le 0 ]; then echo "$f not run: out of time"; rc=124; continue; fi
               s=$(date +%s%N); timeout "$left" python3 -m diagnose check "$f" --problems-root .problems/rk --budget "${TRIAGE_BUDGET:-60}" \
                 --quiet --out "$R/alone-$name/$(basename "$f" .py)" > /dev/null 2>&1; c=$?
               echo "$f exit=$c $(( ($(date +%s%N) - s) / 1000000 )) ms"; [ "$c" -eq 124 ] && rc=124
             done | tee "$R/alone-$name.txt"; grep -q "exit=124\|out of time" "$R/alone-$name.txt" && rc=124 ;;
    smoke:*) timeout 300 python3 "tests/gpu/${part#smoke:}.py" > "$R/smoke.txt" 2>&1; rc=$?; tail -20 "$R/smoke.txt" ;;
    home:*) (find "$HOME/.cache/torch_extensions" -type f -exec md5sum {} + 2>/dev/null | sort -k2; echo "files: $(find "$HOME/.cache/torch_extensions" -type f 2>/dev/null | wc -l)") > "$R/home-${part#home:}.txt"
            rc=0; tail -1 "$R/home-${part#home:}.txt" ;;
    *) echo "unknown part $part"; rc=2 ;;
  esac
  echo "== $part rc=$rc $(( $(date +%s) - t0 )) s" | tee -a "$R/summary.txt"
  pack
done
nvidia-smi --query-gpu=memory.used --format=csv,noheader | tee -a "$R/gpu.txt"
pack
