#!/usr/bin/env bash
# The GPU check, on a lent CUDA machine (no Debian packages there), from the repository root:
# unpacks .gpu-check/bundle.tar.xz (made by pack.sh), runs every `gpu`-labelled test, then
# `ragraph bench llm --device cuda` on the synthetic 28M model and on the shipped model, then
# compute-sanitizer's memcheck over the kernel tests while time is left. Logs go to $OUT.
# Before sending the tree: pack.sh, then aside.sh out (and aside.sh back after); carry .gpu-check.
#
# usage: packaging/gpu-check/run-on-device.sh [SECONDS]   (default 330: stop starting new steps after)
set -u
budget=${1:-330}
OUT=${OUT:-/tmp/gpu-check-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
step() { echo "== [$(elapsed) s] $*"; }

rt=/tmp/ragraph-gpu-check
rm -rf "$rt" && mkdir -p "$rt"
step "unpack $(du -h .gpu-check/bundle.tar.xz | cut -f1)"
if command -v xz >/dev/null; then tar -C "$rt" -xJf .gpu-check/bundle.tar.xz
else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .gpu-check/bundle.tar.xz "$rt"; fi || exit 1

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
echo "glibc $(getconf GNU_LIBC_VERSION | cut -d' ' -f2), $(nproc) cores"
cublas=$(ls /usr/local/cuda/lib64/libcublas.so.13 /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13 2>/dev/null | head -1)
[ -n "$cublas" ] || cublas=$(find /usr /opt -name 'libcublas.so.13' 2>/dev/null | head -1)
echo "cuBLAS: ${cublas:-not found}"
export LD_LIBRARY_PATH="$rt/lib${cublas:+:$(dirname "$cublas")}:/usr/local/nvidia/lib64:/usr/local/nvidia/lib"
# The tests look for datasets/ under the source directory compiled into them (/work/main).
if [ ! -e /work/main ]; then mkdir -p /work && ln -s "$PWD" /work/main; fi

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

bench() {  # NAME SECONDS ARGS...
  local name=$1 limit=$2; shift 2
  step "bench $name: ragraph $*"
  timeout "$limit" "$rt/bin/ragraph" "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"; local rc=$?
  echo "rc=$rc"; tail -4 "$OUT/$name.err"
}
bench bench-llm-synthetic 150 bench llm --synthetic --device cuda --json
bench bench-llm-model 120 bench llm --model datasets/models/rag-llama --device cuda --json

# Nsight Compute over one batch-1 decode step of the synthetic model (launches ~250 to ~340:
# after the CPU figures, the first GPU prefill and the graph capture): each kernel's duration.
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$ncu" ] && [ "$(elapsed)" -lt "$budget" ]; then
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
for t in kernels_test_paged_decode_attention kernels_test_prefill_attention kernels_test_kv_write \
         kernels_test_llama_step kernels_test_runner_cuda; do
  [ -x "$sanitizer" ] && [ "$(elapsed)" -lt "$budget" ] || break
  step "memcheck $t"
  timeout 120 "$sanitizer" --tool memcheck --leak-check no --error-exitcode 9 "$rt/bin/$t" >"$rt/m.log" 2>&1
  echo "rc=$?"; grep -E "ERROR SUMMARY|Totals:|Invalid" "$rt/m.log" | head -5
  { echo "##### memcheck $t"; cat "$rt/m.log"; } >> "$OUT/tests.log"
done
step "done"
