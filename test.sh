#!/usr/bin/env bash
# Sets everything up (Debian packages, configure, build) and runs the tests through ctest.
# Exit code 0 only if all tests pass. Extra arguments go to ctest (e.g. ./test.sh -L unit).
#   ./test.sh [--preset release|asan|tsan] [--target T] [ctest options]
# --preset builds and tests that CMakePresets.json configuration (asan, tsan: sanitizer builds in
# build-asan/, build-tsan/, engine and CLI without the GUI); --target builds only target T first
# (e.g. `./test.sh --preset asan --target torchfree_tests -L torchfree`, what CI runs).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
preset=release
targets=""
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset="${2:?--preset needs a name: release, asan or tsan}"; shift 2 ;;
    --preset=*) preset="${1#--preset=}"; shift ;;
    --target) targets="$targets ${2:?--target needs a target name}"; shift 2 ;;
    *) break ;;
  esac
done
RAGWB_PRESET="$preset" RAGWB_TARGETS="${targets# }" "$root/packaging/build.sh"
cd "$root"
ctest --preset "$preset" -j "${RAGWB_TEST_JOBS:-2}" "$@"
