#!/usr/bin/env bash
# Installs a built ragraph-workbench .deb into a temporary root (no container: `dpkg -x`, plus
# `dpkg --dry-run -i` against this machine's package database when run as root, which checks
# that every dependency the package declares is satisfiable), then runs the installed binaries
# the way a user would, as a fresh user whose XDG data directory is empty:
#   ragraph corpus build  (into $XDG_DATA_HOME/ragraph), ragraph index build, ragraph demo,
#   ragraph run --qa (the shipped model found under /usr/share/ragraph),
#   ragraph-workbench --demo --screenshot (offscreen).
#
#   check-deb.sh DEB [--wordnet DIR --foldoc DIR]   (default: Debian's WordNet and FOLDOC;
#                                                    the test suite passes its small fixtures)
# Exit 0 when every step did what it should; otherwise the failing step's output and exit 1.
set -euo pipefail
deb=${1:?usage: check-deb.sh DEB [--wordnet DIR --foldoc DIR]}
shift
[ -f "$deb" ] || { echo "check-deb: no package at $deb; build it with \`cpack -G DEB\` in the build directory" >&2; exit 1; }
sources=("$@")

work=$(mktemp -d "${TMPDIR:-/tmp}/ragwb-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
step() { echo "== $*"; }
fail() { echo "check-deb: FAILED: $*" >&2; exit 1; }

step "dpkg -x $(basename "$deb")"
dpkg -x "$deb" "$root"
for f in usr/bin/ragraph usr/bin/ragraph-workbench \
         usr/share/ragraph/datasets/models/rag-llama/model.safetensors \
         usr/share/ragraph/datasets/models/rag-llama-roles/model.safetensors \
         usr/share/ragraph/datasets/models/rag-llama-roles-wide/model.safetensors \
         usr/share/ragraph/datasets/models/rag-embedder/tokenizer.json \
         usr/share/ragraph/datasets/models/rag-embedder-lex/model.safetensors \
         usr/share/ragraph/workflows/oneshot.json \
         usr/share/applications/io.github.ragraph.Workbench.desktop \
         usr/share/metainfo/io.github.ragraph.Workbench.metainfo.xml \
         usr/share/icons/hicolor/scalable/apps/ragraph-workbench.svg \
         usr/share/man/man1/ragraph.1.gz usr/share/man/man1/ragraph-workbench.1.gz; do
  [ -s "$root/$f" ] || fail "the package has no $f"
done
for page in ragraph ragraph-workbench; do
  zcat "$root/usr/share/man/man1/$page.1.gz" | head -1 | grep -q '^\.TH ' || fail "$page.1.gz is not a man page"
done
zcat "$root/usr/share/man/man1/ragraph.1.gz" | grep -q 'ragraph serve' || fail "ragraph(1) does not list \`ragraph serve\`"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libtorch libqt6widgets6 libsqlite3 wordnet-base dict-foldoc; do
  case $depends in *"$lib"*) ;; *) fail "Depends lacks $lib: $depends" ;; esac
done
if command -v appstreamcli >/dev/null 2>&1; then
  appstreamcli validate --no-net "$root/usr/share/metainfo/io.github.ragraph.Workbench.metainfo.xml" >/dev/null ||
    fail "the AppStream metainfo does not validate"
fi
if [ "$(id -u)" -eq 0 ]; then
  step "dpkg --dry-run -i (dependencies satisfiable on this machine)"
  dpkg --dry-run -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg -i would not install it"; }
fi

# A fresh user: nothing of the build tree's environment, an empty XDG data directory.
export HOME=$work/home XDG_DATA_HOME=$work/home/.local/share XDG_RUNTIME_DIR=$work/run
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
unset RAGRAPH_CORPUS RAGRAPH_DATA_DIR
bin=$root/usr/bin
data=$XDG_DATA_HOME/ragraph

run() {  # run LOG CMD...: the command's output in LOG, shown when it fails
  local log=$work/$1; shift
  "$@" >"$log" 2>&1 || { cat "$log" >&2; fail "\`$*\` exited $?"; }
}
step "ragraph corpus build ${sources[*]}"
run corpus.log "$bin/ragraph" corpus build --quiet "${sources[@]}"
[ -s "$data/corpus.db" ] || fail "corpus build did not write $data/corpus.db"
step "ragraph index build"
run index.log "$bin/ragraph" index build --quiet --dtype f32
[ -s "$data/corpus.db.index.ivf" ] || fail "index build did not write $data/corpus.db.index.ivf"
step "ragraph demo"
run demo.log "$bin/ragraph" demo --requests 1 --trace-out "$work/trace.json"
grep -q "corpus $data/corpus.db" "$work/demo.log" || { cat "$work/demo.log" >&2; fail "the demo did not open the XDG corpus"; }
grep -q "^Accuracy on these" "$work/demo.log" || { cat "$work/demo.log" >&2; fail "the demo served no workflow"; }
step "ragraph run --qa 2 (the shipped model, found under /usr/share/ragraph)"
run answer.log "$bin/ragraph" run --qa 2 --context gold --max-tokens 8 --json
grep -q '"answer"' "$work/answer.log" || { cat "$work/answer.log" >&2; fail "run printed no answer"; }
step "ragraph-workbench --demo --screenshot"
QT_QPA_PLATFORM=offscreen run gui.log timeout 600 "$bin/ragraph-workbench" --demo --screenshot "$work/shot.png"
grep -q "demo run" "$work/gui.log" || { cat "$work/gui.log" >&2; fail "the workbench demo served no run"; }
[ -s "$work/shot.png" ] || fail "the workbench wrote no screenshot"
echo "check-deb: OK ($(du -h "$deb" | cut -f1) package; demo: $(grep -c " correct$" "$work/demo.log") workflows served;" \
     "workbench: $(grep -c 'demo run' "$work/gui.log") runs)"
grep -h "demo run\|^Accuracy" "$work/gui.log" "$work/demo.log" | sed 's/^/  /' | head -20
