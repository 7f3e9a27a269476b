#!/usr/bin/env bash
# The recipe of the shipped RAG model (datasets/models/rag-llama): a 4,096-piece tokenizer,
# then two phases of `ragraph train lm`, each resumable, and a learning curve of held-out (dev)
# accuracy taken from the checkpoints while training runs.
#
#   datasets/models/train-rag-llama.sh WORKDIR            # run or resume every phase
#   datasets/models/train-rag-llama.sh WORKDIR --ship     # copy the final model into the repo
#
# Phase 1 (recall1): synthetic "key: value." lists of 8 single-token names asked back in
#   shuffled order, answer-only loss, constant learning rate: the densest copying signal, to make
#   induction heads form.
# Phase 2 (recall2): the same with names of up to 4 tokens and as many pairs as fit
#   (RECALL2_STEPS=0 skips it).
# Phase 3 (qa): the QA prompts of evaluation, 1..5 passages per context (curriculum by
#   mixture), three questions per context, answer-only loss.
# Phase 4 (qa2, QA2_STEPS > 0): the same data continued at half the learning rate.
# Interrupt with Ctrl-C: the running phase checkpoints (it also does every 100 steps); run the same command
# again to continue. Steps, threads and the binary can be overridden from the environment.
set -euo pipefail

work=${1:?usage: $0 WORKDIR [--ship]}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
ragraph=${RAGRAPH:-$repo/build/bin/ragraph}
recall1_steps=${RECALL1_STEPS:-4000}
recall2_steps=${RECALL2_STEPS:-3000}
qa_steps=${QA_STEPS:-8000}
qa2_steps=${QA2_STEPS:-0}          # a second, lower-rate QA phase from the first (0: none)
curve_every=${CURVE_EVERY:-500}     # steps between learning-curve points
curve_items=${CURVE_ITEMS:-400}     # dev items per point (spread over the question types)
shape=(--layers 4 --hidden 128 --heads 4 --kv-heads 4 --ffn 352)
common=(--batch 16 --dtype bf16 --seed 1 --prompt-loss 0 --checkpoint-every 100 --log-every 50)

last=$work/qa
(( qa2_steps > 0 )) && last=$work/qa2
if [[ ${2:-} == --ship ]]; then
  [[ -f $last/model.safetensors ]] || { echo "the last phase is not finished in $last" >&2; exit 1; }
  dest=$repo/datasets/models/rag-llama
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  cp "$last"/{config.json,model.safetensors,tokenizer.json} "$dest.tmp"/
  [[ -f $last/tokenizer_config.json ]] && cp "$last/tokenizer_config.json" "$dest.tmp"/
  [[ -f $dest/PROVENANCE.md ]] && cp "$dest/PROVENANCE.md" "$dest.tmp"/  # kept; update it by hand
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  echo "shipped $dest ($(du -sh "$dest" | cut -f1))"
  exit 0
fi

mkdir -p "$work"
[[ -x $ragraph ]] || { echo "no ragraph binary at $ragraph; build first (./run.sh --build-only or ninja -C build)" >&2; exit 1; }
[[ -f $work/tok/tokenizer.json ]] || "$ragraph" train tokenizer --vocab 4096 --out "$work/tok"

# One phase: skipped when its final model exists, resumed when it has a checkpoint.
phase() {
  local out=$1; shift
  [[ -f $out/model.safetensors ]] && return 0
  local resume=()
  [[ -d $out/checkpoint ]] && resume=(--resume)
  "$ragraph" train lm --out "$out" "$@" "${common[@]}" "${resume[@]}" 2>&1 | tee -a "$out.log"
}

# Learning curve: every curve_every steps of a phase's checkpoint, dev accuracy with the gold
# passage among 5 and with none, one JSON line each in $work/curve.jsonl.
curve() {
  local done_key=-1
  while :; do
    for p in recall1 recall2 qa qa2; do
      local state=$work/$p/checkpoint/trainer_state.json
      [[ -f $state ]] || continue
      local step; step=$(grep -o '"step": *[0-9]*' "$state" | head -1 | grep -o '[0-9]*$')
      local key=$p:$((step / curve_every))
      [[ $key == "$done_key" ]] && continue
      [[ $p == recall* && -d $work/qa/checkpoint ]] && continue
      [[ $p == qa && -d $work/qa2/checkpoint ]] && continue
      local snap=$work/curve-snap
      rm -rf "$snap" && cp -r "$work/$p/checkpoint" "$snap" 2>/dev/null || continue
      for ctx in gold none; do
        local acc
        acc=$("$ragraph" eval qa --split dev --limit "$curve_items" --context "$ctx" --model "$snap" \
                --json 2>/dev/null | tr -d '\n ' ) || continue
        echo "{\"phase\":\"$p\",\"step\":$step,\"context\":\"$ctx\",\"eval\":$acc}" >> "$work/curve.jsonl"
      done
      done_key=$key
    done
    [[ -f $last/model.safetensors ]] && return 0
    sleep 60
  done
}
curve &
curve_pid=$!
trap 'kill $curve_pid 2>/dev/null || true' EXIT

phase "$work/recall1" --tokenizer "$work/tok" "${shape[@]}" --data recall --recall-name-tokens 1 \
  --recall-pairs 8 --steps "$recall1_steps" --seq-len 160 --lr 2e-3 --min-lr 2e-3 --warmup 50
qa_from=$work/recall1
if (( recall2_steps > 0 )); then
  phase "$work/recall2" --init "$work/recall1" --data recall --recall-name-tokens 4 \
    --steps "$recall2_steps" --seq-len 256 --lr 2e-3 --min-lr 1e-3 --warmup 50
  qa_from=$work/recall2
fi
phase "$work/qa" --init "$qa_from" --data qa --questions 3 --passages 5 --min-passages 1 \
  --steps "$qa_steps" --seq-len 320 --lr 1e-3 --warmup 100
if (( qa2_steps > 0 )); then
  phase "$work/qa2" --init "$work/qa" --data qa --questions 3 --passages 5 --min-passages 1 \
    --steps "$qa2_steps" --seq-len 320 --lr 5e-4 --min-lr 5e-5 --warmup 50
fi
wait $curve_pid || true
echo "done: $last; learning curve in $work/curve.jsonl; ship with $0 $work --ship"
