#!/usr/bin/env bash
# Packs what the GPU check needs into .gpu-check/bundle.tar.xz (git-ignored): the CLI, the
# `gpu`-labelled tests and the libraries they load (make-bundle.py), then runs every packed test
# here with the bundle's libraries shadowing the system's, so a missing or wrongly stubbed
# library shows up here rather than on the lent machine. run-on-device.sh unpacks and runs it.
#
# usage: packaging/gpu-check/pack.sh [BUILD_DIR]   (default: build; configured with RAGWB_CUDA=ON)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=.gpu-check
tests=$(ctest --test-dir "$build" -L gpu -N | awk '/Test +#/ {print $3}')
[ -n "$tests" ] || { echo "pack.sh: no gpu-labelled tests in $build (configure with -DRAGWB_CUDA=ON)" >&2; exit 1; }
bins=("$build/bin/ragraph")
for t in $tests; do bins+=("$build/tests/$t"); done
rm -rf "$out/stage" && mkdir -p "$out"
python3 packaging/gpu-check/make-bundle.py "$out/stage" "${bins[@]}"
echo "$tests" > "$out/stage/tests.txt"

# Every packed program must load from the bundle alone: run each (no GPU here, so the tests skip
# and ragraph prints its usage) and stop where a stub was called or a library is missing.
for b in "$out"/stage/bin/*; do
  log=$(LD_LIBRARY_PATH="$out/stage/lib" "$b" 2>&1) || true
  if grep -qE "is a stub|error while loading shared libraries|symbol lookup error" <<<"$log"; then
    echo "pack.sh: $(basename "$b") does not start from the bundle:" >&2; grep -m3 -E "stub|error" <<<"$log" >&2; exit 1
  fi
done
tar -C "$out/stage" -cf - bin lib tests.txt | xz -T0 -9 > "$out/bundle.tar.xz.part"
mv "$out/bundle.tar.xz.part" "$out/bundle.tar.xz"
rm -rf "$out/stage"
ls -la "$out/bundle.tar.xz"
