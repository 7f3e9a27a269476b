#!/usr/bin/env bash
# Packs what `bench serve` and `workflow run` read besides the model — the corpus, its IVF index
# and passage vectors, the calibrated nprobe and the embedder — for a lent GPU machine, in parts
# small enough to travel one per call (the tree after `aside.sh out` is ~9 MiB of the 64 MiB).
# The parts are one xz stream cut into pieces (.gpu-data/part00, part01, ...) with a manifest of
# their sizes and checksums; run-on-device.sh receive keeps each part on the machine and
# run-on-device.sh serve checks the manifest, joins them and unpacks.
#
# usage: packaging/gpu-check/pack-data.sh [CORPUS]   (default: $RAGRAPH_CORPUS or ~/.local/share/ragraph/corpus.db)
set -euo pipefail
cd "$(dirname "$0")/../.."
corpus=${1:-${RAGRAPH_CORPUS:-${XDG_DATA_HOME:-$HOME/.local/share}/ragraph/corpus.db}}
part_mb=${RAGWB_PART_MB:-52}
out=.gpu-data
files=("$corpus" "$corpus.index.ivf" "$corpus.index.vectors" "$corpus.index.nprobe.json")
for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "pack-data.sh: $f is missing; build it with ragraph corpus build / index build / index calibrate" >&2; exit 1; }
done
# The embedder is in the tree, or where aside.sh out put it.
embedder=datasets/models/rag-embedder
[ -d "$embedder" ] || embedder=${RAGWB_ASIDE_DIR:-/tmp/ragwb-aside}/$embedder
[ -f "$embedder/model.safetensors" ] || { echo "pack-data.sh: no embedder at datasets/models/rag-embedder" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/data"
for f in "${files[@]}"; do ln -s "$(realpath "$f")" "$stage/data/$(basename "$f" | sed "s/^$(basename "$corpus")/corpus.db/")"; done
ln -s "$(realpath "$embedder")" "$stage/data/rag-embedder"
# One thread and a 256 MiB dictionary: the IVF file holds every vector of the .vectors file again
# (IVF-Flat, in cluster order), and a window that spans both finds each 1 KB row the second time
# (the pair: 124 MB instead of ~250 MB; decompression needs 256 MiB of memory).
tar -C "$stage" -chf - data | xz -T1 --lzma2=preset=6,dict=256MiB | split -b "${part_mb}M" -d - "$out/part"
(cd "$out" && for p in part*; do echo "$p $(stat -c %s "$p") $(sha256sum "$p" | cut -d' ' -f1)"; done) > "$out/manifest.txt"
cat "$out/manifest.txt"
n=$(wc -l < "$out/manifest.txt")
echo "pack-data.sh: $n parts in $out; send each with run-on-device.sh receive (carry [\".gpu-data/partNN\"]),"
echo "the last with the manifest too (carry [\".gpu-data/partNN\", \".gpu-data/manifest.txt\"]), then run-on-device.sh serve"
