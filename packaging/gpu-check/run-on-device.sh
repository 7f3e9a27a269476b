#!/usr/bin/env bash
# The GPU checks, on a lent CUDA machine (no Debian packages there), from the repository root.
# Logs go to $OUT. Before sending the tree: pack.sh, then aside.sh out (aside.sh back after).
#
#   run-on-device.sh check [SECONDS]  carry .gpu-check: unpack the bundle (pack.sh), run every
#                                     `gpu`-labelled test, `bench llm --device cuda` on the
#                                     synthetic 28M model and the shipped one, an Nsight Compute
#                                     profile of one decode step and compute-sanitizer's memcheck
#                                     (no new step after SECONDS, default 330; BENCH=0: the tests
#                                     and memcheck alone)
#   run-on-device.sh receive          carry .gpu-check on the first call, then one part of
#                                     pack-data.sh's per call (.gpu-data/partNN; the manifest with
#                                     the last): the bundle is unpacked once and each part kept in
#                                     /tmp, which lasts while the machine stays warm (30 s idle)
#   run-on-device.sh serve [SECONDS [ARGS...]]
#                                     after every part arrived: join and unpack the data, then
#                                     `workflow run --device cuda`, one traced Multistep rate per
#                                     policy (TRACE=0 skips it; TRACE_RPS, default 64, sets the
#                                     rate, TRACE_WORKFLOW another workflow), `bench llm` of the shipped model (LLM=1), `bench ivf` with half the
#                                     cores (IVF=0 skips it), the GPU encoder's test on the shipped
#                                     embedder and HedraRAG Fig. 13's
#                                     `bench serve --find-max` (or `bench serve --quick ARGS`) with
#                                     --device cuda (once per ENCODERS placement of the query
#                                     encoder: ENCODERS="cpu cuda", ENCODER_GPU_MIN=N for
#                                     --encoder-gpu-min), then --device cpu on the same
#                                     machine while SECONDS (default 330) last
set -u
mode=${1:-check}
budget=${2:-330}
OUT=${OUT:-/tmp/gpu-check-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
step() { echo "== [$(elapsed) s] $*"; }

rt=/tmp/ragraph-gpu-check      # the unpacked bundle
data=/tmp/ragraph-gpu-data     # the data parts, then the data
# Unpacks the bundle when this call carries one that is not unpacked yet.
if [ -f .gpu-check/bundle.tar.xz ] && ! cmp -s .gpu-check/bundle.tar.xz "$rt/bundle.tar.xz"; then
  rm -rf "$rt" && mkdir -p "$rt"
  step "unpack $(du -h .gpu-check/bundle.tar.xz | cut -f1)"
  if command -v xz >/dev/null; then tar -C "$rt" -xJf .gpu-check/bundle.tar.xz
  else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .gpu-check/bundle.tar.xz "$rt"; fi || exit 1
  cp .gpu-check/bundle.tar.xz "$rt/bundle.tar.xz"
fi
[ -x "$rt/bin/ragraph" ] || { echo "run-on-device.sh: no bundle here: carry .gpu-check (made by pack.sh)" >&2; exit 1; }

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
echo "glibc $(getconf GNU_LIBC_VERSION | cut -d' ' -f2), $(nproc) cores"
cublas=$(ls /usr/local/cuda/lib64/libcublas.so.13 /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13 2>/dev/null | head -1)
[ -n "$cublas" ] || cublas=$(find /usr /opt -name 'libcublas.so.13' 2>/dev/null | head -1)
echo "cuBLAS: ${cublas:-not found}"
export LD_LIBRARY_PATH="$rt/lib${cublas:+:$(dirname "$cublas")}:/usr/local/nvidia/lib64:/usr/local/nvidia/lib"
# The bundle's OpenBLAS (0.3.21) does not know the lent machines' CPUs and falls back to its SSE3
# kernels there; ragraph starts itself again with the set the CPU has (engine/core/blas_info.h),
# and `bench serve` reports the one that ran (settings.blas_kernels).
# The tests look for datasets/ under the source directory compiled into them (/work/main).
if [ ! -e /work/main ]; then mkdir -p /work && ln -s "$PWD" /work/main; fi

bench() {  # NAME SECONDS ARGS...: ragraph ARGS, stdout to $OUT/NAME.json (skipped past the budget)
  local name=$1 limit=$2; shift 2
  [ "$(elapsed)" -lt "$budget" ] || { echo "skipped $name: past the budget of $budget s"; return; }
  step "$name: ragraph $*"
  timeout "$limit" "$rt/bin/ragraph" "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"; local rc=$?
  echo "rc=$rc"; tail -4 "$OUT/$name.err"; grep -A70 "fatal signal" "$OUT/$name.err"
}

case "$mode" in
  check) ;;
  receive)
    mkdir -p "$data"
    for p in .gpu-data/part* .gpu-data/manifest.txt; do
      [ -f "$p" ] && mv "$p" "$data/" && echo "received $(basename "$p"): $(du -h "$data/$(basename "$p")" | cut -f1)"
    done
    echo "parts here: $(ls "$data" | grep -c '^part') ($(du -sh "$data" | cut -f1))"
    step "done"
    exit 0 ;;
  serve)
    [ -f "$data/manifest.txt" ] || { echo "run-on-device.sh: no manifest in $data: send the last part with .gpu-data/manifest.txt" >&2; exit 1; }
    while read -r part size sum; do
      [ "$(stat -c %s "$data/$part" 2>/dev/null)" = "$size" ] && [ "$(sha256sum "$data/$part" | cut -d' ' -f1)" = "$sum" ] ||
        { echo "run-on-device.sh: $part is missing or damaged: send it again (receive)" >&2; exit 1; }
    done < "$data/manifest.txt"
    if [ ! -f "$data/data/corpus.db" ]; then
      step "join and unpack $(wc -l < "$data/manifest.txt") parts"
      (cd "$data" && cat $(cut -d' ' -f1 manifest.txt)) | xz -d | tar -C "$data" -xf - || exit 1
    fi
    d=$data/data
    export RAGRAPH_CORPUS=$d/corpus.db RAGRAPH_DATA_DIR=$data/home
    # The bundle's ragraph is outside a build tree: name the shipped model and the embedder.
    models=(--model "$PWD/datasets/models/rag-llama" --embedder "$d/rag-embedder")
    devices=(${DEVICES:-cuda cpu})  # DEVICES=cpu rehearses this mode on a machine without a GPU
    # Half the cores each, or THREADS="--retrieval-threads R --generation-threads G" (with the model
    # on the GPU the generation worker computes nothing on its threads but its loop).
    read -r -a threads <<< "${THREADS:---retrieval-threads $(( $(nproc) / 2 )) --generation-threads $(( $(nproc) / 2 ))}"
    bench workflow-run 120 workflow run --builtin oneshot "What is a compiler?" --device "${devices[0]}" "${models[@]}" --json
    head -c 1500 "$OUT/workflow-run.json"; echo
    # The GPU query encoder against the CPU kernels on the shipped embedder (which the tree sent
    # here lacks: aside.sh moves it out; the data carries it).
    if [ "${devices[0]}" != cpu ] && [ -x "$rt/bin/kernels_test_bert_encoder" ]; then
      step "kernels_test_bert_encoder with the shipped embedder"
      RAGWB_EMBEDDER=$d/rag-embedder timeout 120 "$rt/bin/kernels_test_bert_encoder" >"$rt/t.log" 2>&1
      echo "rc=$?"; grep -E "^(PASS|FAIL|SKIP)|Totals|Loc:|Actual|Expected|worst" "$rt/t.log" | head -20
    fi
    # What a retrieval sub-stage costs over one unbounded step with the retrieval worker's
    # threads (budgeted.over_unbounded_step; synthetic vectors, no data needed; IVF=0 skips it).
    if [ "${IVF:-1}" = 1 ]; then
      OMP_NUM_THREADS=$(( $(nproc) / 2 )) bench ivf 90 bench ivf --budget-ms 1 --json
      grep -oE '"(stepwise_over_faiss|step_seconds_median|steps|over_unbounded_step|openmp_threads)": [0-9.e-]+' "$OUT/ivf.json" | tr '\n' ' '; echo
    fi
    # The decode figures of the shipped model on this device (LLM=1; off by default).
    if [ "${LLM:-0}" = 1 ]; then
      bench bench-llm-model 120 bench llm --model datasets/models/rag-llama --device "${devices[0]}" --json
      python3 -c 'import json, sys; g = json.load(open(sys.argv[1])).get("gpu", {}); [print(k, g.get(k)) for k in
        ("decode_tokens_per_s", "decode_step_ms", "greedy_tokens_speedup", "graph_speedup", "overhead_share")]' \
        "$OUT/bench-llm-model.json"
    fi
    # One Multistep rate per policy with every sub-stage traced (Chrome-trace JSON, xz'd; opens in
    # Perfetto): where hedra's time goes against flashrag's on this machine (TRACE=0: skipped).
    if [ "${TRACE:-1}" = 1 ]; then
      bench serve-trace 90 bench serve --quick --workflows "${TRACE_WORKFLOW:-multistep}" --modes flashrag,hedra-nogpucache,hedra --rps "${TRACE_RPS:-64}" \
        --min-seconds 2 --device "${devices[0]}" "${threads[@]}" "${models[@]}" --trace "$rt/serve.trace.json"
      [ -f "$rt/serve.trace.json" ] && xz -T0 -c "$rt/serve.trace.json" > "$OUT/serve.trace.json.xz" &&
        echo "trace: $(du -h "$OUT/serve.trace.json.xz" | cut -f1) xz"
    fi
    # HedraRAG Fig. 13's shape (the Reproduce page's command): each policy's highest sustained rate
    # per workflow; hedra-nogpucache is hedra with every cluster searched on the CPU, so hedra over
    # it is the GPU cluster cache's gain. Retrieval and generation get half the cores each (generation
    # also the GPU with --device cuda).
    # Arguments after SECONDS replace the workflows, modes and rates.
    shift 2 2>/dev/null || shift $#
    [ $# -gt 0 ] || set -- --workflows oneshot,multistep,irg --modes flashrag,hedra,hedra-nogpucache --nprobe 256 \
                            --find-max --min-seconds 3
    fig13=(bench serve --quick "$@" "${threads[@]}" "${models[@]}")
    # ENCODERS="cpu cuda": each GPU run once per query-encoder placement (--encoder-device, cpu
    # by default), named serve-<device>-enc<encoder>.
    for dev in "${devices[@]}"; do
      encoders=(${ENCODERS:-cpu}); [ "$dev" != cpu ] || encoders=(cpu)
      for enc in "${encoders[@]}"; do
        left=$(( budget - $(elapsed) ))
        [ "$left" -gt 30 ] || { echo "no time left for bench serve --device $dev --encoder-device $enc"; break 2; }
        name=serve-$dev; [ "$enc" = cpu ] || name=$name-enc$enc
        # ENCODER_GPU_MIN=N: a GPU encoder takes batches of N texts and more, smaller ones stay on the CPU.
        split=(); [ "$enc" = cpu ] || [ -z "${ENCODER_GPU_MIN:-}" ] || { split=(--encoder-gpu-min "$ENCODER_GPU_MIN"); name=$name-min$ENCODER_GPU_MIN; }
        step "ragraph ${fig13[*]} --device $dev --encoder-device $enc ${split[*]} (at most $left s)"
        timeout "$left" "$rt/bin/ragraph" "${fig13[@]}" --device "$dev" --encoder-device "$enc" "${split[@]}" \
          --json "$OUT/$name.json" >"$OUT/$name.out" 2>"$OUT/$name.err"
        # Each run's line is on stderr as it finishes, so a run cut short by the budget still reports;
        # a crash's report (core/crash_report.h) is printed whole, to resolve here with addr2line.
        rc=$?; echo "rc=$rc"; grep -E '^\[' "$OUT/$name.err"; grep -vE '^\[' "$OUT/$name.err" | tail -3
        grep -A70 "fatal signal" "$OUT/$name.err"
        tail -25 "$OUT/$name.out"
      done
    done
    # A call brings back about 8 files: not the empty ones, nor the logs whose lines are above.
    find "$OUT" -type f \( -empty -o -name '*.err' \) -delete
    step "done"
    exit 0 ;;
  *) echo "usage: run-on-device.sh check|receive|serve [SECONDS]" >&2; exit 2 ;;
esac

step "gpu tests"
: > "$OUT/tests.log"
failed=0
for t in $(cat "$rt/tests.txt"); do
  s=$(date +%s%N)
  timeout 150 "$rt/bin/$t" >"$rt/t.log" 2>&1; rc=$?
  ms=$(( ($(date +%s%N) - s) / 1000000 ))
  { echo "##### $t rc=$rc ${ms} ms"; cat "$rt/t.log"; } >> "$OUT/tests.log"
  totals=$(grep -E "^Totals:|^SKIP" "$rt/t.log" | tail -1)
  echo "$t rc=$rc ${ms} ms  ${totals:-$(tail -1 "$rt/t.log")}"
  [ "$rc" = 0 ] || failed=$((failed + 1))
done
echo "gpu tests failed: $failed"

# BENCH=0 skips the two benches and the profile (the tests and memcheck still run).
if [ "${BENCH:-1}" = 1 ]; then
bench bench-llm-synthetic 150 bench llm --synthetic --device cuda --json
bench bench-llm-model 120 bench llm --model datasets/models/rag-llama --device cuda --json
fi

# Nsight Compute over one batch-1 decode step of the synthetic model (launches ~250 to ~340:
# after the CPU figures, the first GPU prefill and the graph capture): each kernel's duration.
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$ncu" ] && [ "${BENCH:-1}" = 1 ] && [ "$(elapsed)" -lt "$budget" ]; then
  step "ncu: one decode step"
  timeout 150 "$ncu" --launch-skip 250 --launch-count 90 --metrics gpu__time_duration.sum --csv --print-units base \
    "$rt/bin/ragraph" bench llm --synthetic --device cuda --steps 4 --json >"$OUT/profile.csv" 2>"$rt/ncu.err"
  echo "rc=$?"; tail -3 "$rt/ncu.err"
  python3 - "$OUT/profile.csv" <<'PY'
import collections, csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
by = collections.defaultdict(lambda: [0, 0.0])
for r in rows:
    if r.get("Metric Name") == "gpu__time_duration.sum":
        k = r["Kernel Name"].split("(")[0][:60]
        by[k][0] += 1; by[k][1] += float(r["Metric Value"].replace(",", ""))
total = sum(v[1] for v in by.values())
print(f"{len(rows)} kernels, {total / 1e3:.1f} us of GPU time")
for k, (n, ns) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    print(f"  {ns / 1e3:8.1f} us  {n:3d}x  {k}")
PY
fi

sanitizer=/usr/local/cuda/bin/compute-sanitizer
for t in kernels_test_bert_encoder kernels_test_paged_decode_attention kernels_test_prefill_attention \
         kernels_test_kv_write kernels_test_llama_step kernels_test_runner_cuda; do
  [ -x "$sanitizer" ] && [ "$(elapsed)" -lt "$budget" ] || break
  step "memcheck $t"
  timeout 120 "$sanitizer" --tool memcheck --leak-check no --error-exitcode 9 "$rt/bin/$t" >"$rt/m.log" 2>&1
  echo "rc=$?"; grep -E "ERROR SUMMARY|Totals:|Invalid" "$rt/m.log" | head -5
  { echo "##### memcheck $t"; cat "$rt/m.log"; } >> "$OUT/tests.log"
done
step "done"
