#!/usr/bin/env bash
# Shared set-up for run.sh and test.sh: Debian packages, configure (once), incremental build.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/packaging/install-deps.sh"

# Debian's nvcc lives outside PATH; CMake finds it here when present.
if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null 2>&1; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
# Paths under the checkout are hashed relative to it, so worktrees and clones share hits.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"

# RAGWB_PRESET picks a configure preset of CMakePresets.json (release: build/; asan: build-asan/;
# tsan: build-tsan/); RAGWB_TARGETS, when set, builds only those targets (e.g. torchfree_tests).
preset="${RAGWB_PRESET:-release}"
case "$preset" in
  release) dir=build ;;
  asan|tsan) dir="build-$preset" ;;
  *) echo "error: unknown preset '$preset'; use release, asan or tsan (CMakePresets.json)" >&2; exit 2 ;;
esac
if [ ! -f "$dir/build.ninja" ]; then
  cmake --preset "$preset" >"/tmp/ragwb-configure-$preset.log" 2>&1 || {
    cat "/tmp/ragwb-configure-$preset.log" >&2; echo "error: CMake configure ($preset) failed (log above)" >&2; exit 1; }
fi
jobs="${RAGWB_JOBS:-$(nproc)}"
# shellcheck disable=SC2086  # RAGWB_TARGETS is a space-separated list
cmake --build "$dir" -j "$jobs" ${RAGWB_TARGETS:+--target $RAGWB_TARGETS}
