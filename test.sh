#!/usr/bin/env bash
# Sets everything up (Debian packages, configure, build) and runs every test through ctest.
# Exit code 0 only if all tests pass. Extra arguments go to ctest (e.g. ./test.sh -L unit).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$root/packaging/build.sh"
cd "$root/build"
ctest --output-on-failure -j "${RAGWB_TEST_JOBS:-2}" "$@"
