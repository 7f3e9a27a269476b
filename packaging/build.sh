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

if [ ! -f build/build.ninja ]; then
  cmake --preset release >/tmp/ragwb-configure.log 2>&1 || {
    cat /tmp/ragwb-configure.log >&2; echo "error: CMake configure failed (log above)" >&2; exit 1; }
fi
jobs="${RAGWB_JOBS:-$(nproc)}"
cmake --build build -j "$jobs"
