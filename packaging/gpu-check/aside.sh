#!/usr/bin/env bash
# What travels to a lent GPU machine is the working tree plus carried paths, at most 64 MiB, and
# the tracked tree alone is ~68 MB (mostly models). `aside.sh out` moves the tracked files the GPU
# check does not read (the other models, the embedder, the screenshots: ~57 MB) out of the tree,
# `aside.sh back` returns them; `git status` is clean again after `back`. The check needs only
# datasets/models/rag-llama and .gpu-check/bundle.tar.xz (carry: [".gpu-check"]).
#
# usage: packaging/gpu-check/aside.sh out|back
set -euo pipefail
cd "$(dirname "$0")/../.."
stash=${RAGWB_ASIDE_DIR:-/tmp/ragwb-aside}
paths=(datasets/models/rag-llama-block datasets/models/rag-llama-dep datasets/models/rag-llama-roles datasets/models/rag-llama-roles-wide
       datasets/models/rag-llama-vanilla datasets/models/rag-embedder datasets/models/rag-embedder-lex resources/screenshots)
case "${1:-}" in
  out)
    for p in "${paths[@]}"; do
      [ -e "$p" ] || continue
      [ ! -e "$stash/$p" ] || { echo "aside.sh: $stash/$p exists already; run 'aside.sh back' first" >&2; exit 1; }
      mkdir -p "$stash/$(dirname "$p")" && mv "$p" "$stash/$p"
    done
    # du fails on the tracked files just moved away: it still totals the rest.
    size=$({ git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) || true
    carried=$(du -b .gpu-check/bundle.tar.xz 2>/dev/null | cut -f1) || carried=0
    echo "aside.sh: the tree that travels is $((size / 1048576)) MiB, with the bundle $(((size + carried) / 1048576)) MiB (limit 64)"
    ;;
  back)
    for p in "${paths[@]}"; do
      [ -e "$stash/$p" ] || continue
      [ ! -e "$p" ] || { echo "aside.sh: $p is back already; $stash/$p left in place" >&2; continue; }
      mkdir -p "$(dirname "$p")" && mv "$stash/$p" "$p"
    done
    git status --short -- "${paths[@]}"
    ;;
  *) echo "usage: $0 out|back" >&2; exit 2 ;;
esac
