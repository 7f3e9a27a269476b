#!/usr/bin/env bash
# Sets everything up (Debian packages, configure, build, default corpus on first run) and opens
# the workbench. Without a display it says so and runs a short headless demo instead.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$root/packaging/build.sh"
bin="$root/build/bin"
if [ ! -f "$root/build/data/corpus.db" ] && [ -z "${RAGRAPH_CORPUS:-}" ]; then
  echo "Building the default corpus from WordNet and FOLDOC (first run only, about 10 s)..." >&2
  "$bin/ragraph" corpus build
fi
# The passage index the serving engine retrieves from (embeds every passage with the shipped
# embedder, in F32 on the encoder kernels; resumes where it stopped when interrupted). Kept when
# the shipped embedder built it, rebuilt when another one did (--if-needed; about a second).
if [ -z "${RAGRAPH_CORPUS:-}" ]; then
  if [ ! -f "$root/build/data/corpus.db.index.ivf" ]; then
    echo "Building the passage index (embeds 131,666 passages once: about 8 minutes;" >&2
    echo "interrupted, it resumes)..." >&2
  fi
  "$bin/ragraph" index build --dtype f32 --if-needed
fi
# The index's default nprobe and hybrid fusion, measured once on dev questions (index build does
# it too; this covers indexes built before it did). About a minute each.
if [ -f "$root/build/data/corpus.db.index.ivf" ] && [ -z "${RAGRAPH_CORPUS:-}" ] &&
   { [ ! -f "$root/build/data/corpus.db.index.nprobe.json" ] || [ ! -f "$root/build/data/corpus.db.index.fusion.json" ]; }; then
  echo "Measuring the passage index's default nprobe and hybrid fusion (once, a minute or two)..." >&2
  "$bin/ragraph" index calibrate --quiet
fi
if [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ] || [ "${QT_QPA_PLATFORM:-}" = "offscreen" ]; then
  exec "$bin/ragraph-workbench" "$@"
fi
echo "No display found (DISPLAY and WAYLAND_DISPLAY are unset): running a headless demo with" >&2
echo "build/bin/ragraph instead. Run ./run.sh from a desktop session to open the workbench." >&2
"$bin/ragraph" demo "$@"
# The shipped RAG model answering one test question from its gold passage among distractors.
if [ -f "$root/datasets/models/rag-llama-roles-wide/model.safetensors" ]; then
  echo >&2
  echo "The default model (datasets/models/rag-llama-roles-wide) answering a test question:" >&2
  exec "$bin/ragraph" run --qa 2 --context gold --max-tokens 16
fi
