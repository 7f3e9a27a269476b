#!/usr/bin/env bash
# Writes a man page generated from a binary's own help text, so the pages never drift from it.
#   make-man.sh ragraph BIN OUT            from `ragraph help` (one usage line per command)
#   make-man.sh ragraph-workbench BIN OUT  from `ragraph-workbench --help` (Qt's option list)
# VERSION and (for the date) SOURCE_DATE_EPOCH come from the environment when set.
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: make-man.sh ragraph|ragraph-workbench BIN OUT" >&2; exit 2
fi
name=$1 bin=$2 out=$3
version=${VERSION:-}
date=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" +%Y-%m-%d)
case $name in
  ragraph) help=$("$bin" help) ;;
  ragraph-workbench) help=$(QT_QPA_PLATFORM=offscreen XDG_RUNTIME_DIR="${TMPDIR:-/tmp}" "$bin" --help 2>/dev/null) ;;
  *) echo "make-man.sh: unknown page '$name' (use ragraph or ragraph-workbench)" >&2; exit 2 ;;
esac
[ -n "$help" ] || { echo "make-man.sh: $bin printed no help text" >&2; exit 1; }

tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
# roff: backslashes and hyphens escaped, a leading dot or quote made literal.
printf '%s\n' "$help" | awk -v name="$name" -v version="$version" -v date="$date" '
  function esc(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); sub(/^[.'"'"']/, "\\\\\\&&", s); return s }
  BEGIN {
    upper = toupper(name)
    printf(".TH %s 1 \"%s\" \"RAGraph Workbench %s\" \"User Commands\"\n", upper, date, version)
    print ".SH NAME"
    if (name == "ragraph") {
      print "ragraph \\- RAGraph Workbench command line: corpora, training, evaluation, benchmarks, serving"
      print ".SH SYNOPSIS"
      print ".B ragraph"
      print ".I command"
      print "[options]"
      print ".SH COMMANDS"
    } else {
      print "ragraph\\-workbench \\- design, serve and understand heterogeneous RAG workflows"
      print ".SH SYNOPSIS"
      print ".B ragraph\\-workbench"
      print "[options]"
      print ".SH OPTIONS"
    }
    notes = 0
  }
  name == "ragraph" {
    if ($0 ~ /^  ragraph /) {
      line = substr($0, 3); split(line, w, " ")
      # "ragraph GROUP [NAME] USAGE": NAME is a lower-case word, never an option or operand.
      cmd = w[1] " " w[2]; rest = substr(line, length(w[1]) + length(w[2]) + 3)
      if (w[3] ~ /^[a-z]+$/) { cmd = cmd " " w[3]; rest = substr(rest, length(w[3]) + 2) }
      printf(".TP\n.B %s\n%s\n", esc(cmd), esc(rest))
    } else if ($0 == "" && seen_cmd) {
      if (!notes) { print ".SH NOTES"; notes = 1 } else print ".PP"
    } else if (notes && $0 != "") {
      print esc($0)
    }
    if ($0 ~ /^  ragraph /) seen_cmd = 1
    next
  }
  {
    if ($0 ~ /^  -/) {
      opt = $0; sub(/^  /, "", opt); desc = ""
      if (match(opt, /  +/)) { desc = substr(opt, RSTART + RLENGTH); opt = substr(opt, 1, RSTART - 1) }
      printf(".TP\n.B %s\n%s\n", esc(opt), esc(desc))
    } else if ($0 ~ /^    +/) {
      s = $0; sub(/^ +/, "", s); print esc(s)
    } else if (NR == 2) {
      desc_line = $0
    }
  }
  END {
    if (name == "ragraph-workbench") {
      print ".SH DESCRIPTION"
      print "The desktop workbench: a visual RAGraph editor, a run panel serving the graph on the embedded engine, the CPU/GPU pipeline timeline, the IVF cluster heatmap, the KV\\-tree inspector and the run history. The corpus is the one"
      print ".BR ragraph (1)"
      print "builds."
    }
    print ".SH FILES"
    print ".TP"
    print ".I $XDG_DATA_HOME/ragraph/corpus.db"
    print "The corpus and knowledge graph (built by \\fBragraph corpus build\\fR), with its passage index beside it."
    print ".TP"
    print ".I /usr/share/ragraph/datasets/models/"
    print "The shipped models, each with its PROVENANCE.md."
    print ".SH SEE ALSO"
    print (name == "ragraph" ? ".BR ragraph\\-workbench (1)" : ".BR ragraph (1)")
  }' > "$tmp"
mv "$tmp" "$out"
trap - EXIT
