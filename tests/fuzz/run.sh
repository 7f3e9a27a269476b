#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 14, AddressSanitizer + UndefinedBehaviorSanitizer) in
# build-fuzz/ and runs each for RUNS executions, one at a time, then prints a JSON summary:
#   [{"target": "json", "executions": 1000000, "seconds": 212, "crashes": 0}, ...]
#
#   tests/fuzz/run.sh                      # every target, 1,000,000 executions each
#   RUNS=20000 tests/fuzz/run.sh json foldoc
#
# The seed corpus tests/fuzz/corpus/<target>/ is only read; inputs libFuzzer finds go to
# build-fuzz/corpus/<target>/ and crashing inputs to build-fuzz/artifacts/<target>/ (crash-*,
# leak-*, timeout-*, oom-*). A crash stops that target (exit code 1 at the end); turn its input
# into a regression test and a seed, then run again. Debian packages: clang-14 and
# libclang-rt-14-dev (libFuzzer). Builds with one job and runs at nice 19 (JOBS, NICE override).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$root/build-fuzz}"
runs="${RUNS:-1000000}"
jobs="${JOBS:-1}"
niceness="${NICE:-19}"
all=(json safetensors tokenizer workflow_json trace_file wordnet foldoc http_request)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")

for tool in clang++-14 clang-14; do
  command -v "$tool" >/dev/null || { echo "error: $tool not found: apt-get install clang-14 libclang-rt-14-dev" >&2; exit 2; }
done
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DRAGWB_FUZZ=ON >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 2; }
fi
nice -n "$niceness" ninja -C "$build" -j "$jobs" "${targets[@]/#/fuzz_}" >&2

summary="["
status=0
for t in "${targets[@]}"; do
  work="$build/corpus/$t" artifacts="$build/artifacts/$t"
  mkdir -p "$work" "$artifacts"
  log="$build/fuzz_$t.log"
  touch "$log.start"
  start=$(date +%s.%N)
  rc=0
  nice -n "$niceness" "$build/bin/fuzz_$t" -runs="$runs" -print_final_stats=1 -timeout=30 \
    -rss_limit_mb=2048 -artifact_prefix="$artifacts/" "$work" "$root/tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  end=$(date +%s.%N)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  # Inputs libFuzzer saved for this run (it stops at the first crash, leak, timeout or OOM).
  crashes=$(find "$artifacts" -type f -newer "$log.start" | wc -l)
  [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes=1
  [ "$crashes" -ne 0 ] && { status=1; echo "fuzz_$t: crash, see $log and $artifacts/" >&2; }
  seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  echo "fuzz_$t: ${execs:-0} executions in ${seconds} s, crashes: $crashes" >&2
  [ "$summary" != "[" ] && summary+=","
  summary+=$'\n'"  {\"target\": \"$t\", \"executions\": ${execs:-0}, \"seconds\": $seconds, \"crashes\": $crashes}"
done
echo "$summary"$'\n'"]"
exit $status
