#!/usr/bin/env bash
# The fine-tuning job: pretrain a small transformer as a language model
# through the shards, then fine-tune it as a text classifier on labeled data
# while trainers come and go, and compare it with the same classifier
# trained from scratch on as many tokens and with the majority class.
#
#   deploy/local/finetune.sh [--topics=5] [--labeled_per_topic=200] [--val_fraction=0.5]
#                            [--pretrain_seconds=300] [--epochs=3]
#                            [--workers=2] [--batch=16] [--seq_len=96] [--vocab=2000]
#                            [--d_model=128] [--n_layer=4] [--n_head=4] [--lr=1e-3]
#                            [--finetune_lr=3e-4] [--units_per_epoch=N]
#                            [--work_dir=.cache/finetune]
#                            [--pretrained=FILE.safetensors]
#
# Data from Debian's packages: the `fortunes` package's topic files. Of the
# --topics topics with the most fortunes, --labeled_per_topic fortunes each
# are labeled (label = topic; the few labels a fine-tuning job often has),
# --val_fraction of them held out for validation. The pretraining text is
# every unlabeled fortune, the King James Bible (`bible-kjv`) and the texts
# of the labeled training split without their labels (domain-adaptive
# pretraining, as ULMFiT does), never the validation split. A SentencePiece
# BPE vocabulary of --vocab pieces, trained on the fortunes and the KJV,
# tokenizes everything.
#   a. pretrain a GPT-2-style decoder (TorchScript, tools/models/export_model.py)
#      for --pretrain_seconds with --workers trainers on 2 shards;
#   b. export its weights (spotps-ctl export --names=module); --pretrained
#      gives such a file instead (an earlier run's), skipping a and b;
#   c. fine-tune the same decoder with a classification head, initialised
#      from them (--init_from), for --epochs: one trainer is killed (kill -9)
#      a third of the way in and another joins;
#      (--finetune_lr, lower than pretraining's, as fine-tuning usually is);
#   d. train the classifier from scratch for the same units and learning rate,
#      evaluate both on
#      the validation split and print a table. The last line is
#      finetune: accuracy=A scratch=S majority=M units_lost=N
set -euo pipefail

TOPICS=5
PER_TOPIC=200
VAL_FRACTION=0.5
PRETRAIN_SECONDS=300
EPOCHS=3
WORKERS=2
BATCH=16
SEQ_LEN=96
VOCAB=2000
D_MODEL=128
N_LAYER=4
N_HEAD=4
LR=1e-3
FINETUNE_LR=3e-4
UNITS_PER_EPOCH=0
WORK_DIR=""
PRETRAINED=""
for arg in "$@"; do
  case "$arg" in
    --topics=*) TOPICS=${arg#*=} ;;
    --labeled_per_topic=*) PER_TOPIC=${arg#*=} ;;
    --val_fraction=*) VAL_FRACTION=${arg#*=} ;;
    --pretrain_seconds=*) PRETRAIN_SECONDS=${arg#*=} ;;
    --epochs=*) EPOCHS=${arg#*=} ;;
    --workers=*) WORKERS=${arg#*=} ;;
    --batch=*) BATCH=${arg#*=} ;;
    --seq_len=*) SEQ_LEN=${arg#*=} ;;
    --vocab=*) VOCAB=${arg#*=} ;;
    --d_model=*) D_MODEL=${arg#*=} ;;
    --n_layer=*) N_LAYER=${arg#*=} ;;
    --n_head=*) N_HEAD=${arg#*=} ;;
    --lr=*) LR=${arg#*=} ;;
    --finetune_lr=*) FINETUNE_LR=${arg#*=} ;;
    --units_per_epoch=*) UNITS_PER_EPOCH=${arg#*=} ;;
    --pretrained=*) PRETRAINED=$(realpath "${arg#*=}") ;;
    --work_dir=*) WORK_DIR=${arg#*=} ;;
    -h|--help) sed -n '2,36p' "$0"; exit 0 ;;
    *) echo "finetune.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
[ "$WORKERS" -ge 2 ] || { echo "finetune.sh: --workers must be at least 2 (one is killed)" >&2; exit 2; }

repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=deploy/shell-lib.sh
source "$repo/deploy/shell-lib.sh"
cd "$repo"
say() { echo "[finetune] $*"; }
WORK_DIR=${WORK_DIR:-$repo/.cache/finetune}
mkdir -p "$WORK_DIR"
work=$(cd "$WORK_DIR" && pwd)

install_and_build spotps-ps spotps-trainer spotps-tokenize spotps-generate spotps-ctl \
  spotps-sentencepiece
bin=$repo/build/bin
py=/usr/bin/python3

shard_pids=()
trainer_pids=()
# Trainers first, so that they drain while the shards still serve.
stop_all() {
  stop_processes 30 "${trainer_pids[@]}"
  stop_processes 10 "${shard_pids[@]}"
  wait 2>/dev/null || true
  trainer_pids=()
  shard_pids=()
}
trap 'stop_all' EXIT
trap 'echo; say "interrupted: stopping everything"; exit 130' INT TERM

say "preparing the data in $work"
trainer/data/prepare_corpus.sh "$repo/.cache/corpus" "$bin/spotps-tokenize" > /dev/null
deploy/local/fortunes_to_tsv.py --top_k "$TOPICS" --per_topic "$PER_TOPIC" --rest "$work/rest.txt" \
  "$work/labeled.tsv"
# The vocabulary from general text; the labeled rows' split with it, and the
# training split's texts (no labels) for the language model to read too, as
# ULMFiT-style domain-adaptive pretraining does; never the validation split.
"$bin/spotps-tokenize" --tokenizer="sp:$VOCAB" --input="$work/rest.txt,$repo/.cache/corpus/kjv.txt" \
  --output="$work/vocabulary.tokens" > "$work/vocabulary.log"
"$bin/spotps-tokenize" --labeled --tokenizer="sp_model:$work/vocabulary.tokens.spm" \
  --input="$work/labeled.tsv" --output="$work/labeled.examples" --seq_len="$SEQ_LEN" \
  --val_fraction="$VAL_FRACTION" --train_text_out="$work/labeled-train.txt" |
  tee "$work/labeled.log" | tail -n 1
"$bin/spotps-tokenize" --tokenizer="sp_model:$work/vocabulary.tokens.spm" \
  --input="$work/rest.txt,$work/labeled-train.txt,$repo/.cache/corpus/kjv.txt" \
  --output="$work/pretrain.tokens" | tail -n 1
# The majority class's share of the validation split, from the split's counts.
majority=$(sed -n 's/.*train\/validation: \([^)]*\)).*/\1/p' "$work/labeled.log" |
  tr ',' '\n' | awk '{split($2, c, "/"); n += c[2]; if (c[2] > m) m = c[2]} END {printf "%.4f", m / n}')
shape=(--vocab_size="$VOCAB" --context_len="$SEQ_LEN" --n_layer="$N_LAYER" --n_head="$N_HEAD"
       --d_model="$D_MODEL")
"$py" tools/models/export_model.py --arch=gpt2 "${shape[@]}" --out="$work/lm.pt" 2>/dev/null
"$py" tools/models/export_model.py --arch=gpt2 --task=classify --num_classes="$TOPICS" \
  "${shape[@]}" --out="$work/classifier.pt" 2>/dev/null

threads=$(( $(nproc) / WORKERS )); [ $threads -ge 1 ] || threads=1
# start_job NAME EPOCHS UNITS LR: 2 fresh shards coordinating EPOCHS of UNITS.
start_job() {
  local dir=$work/$1
  rm -rf "$dir" && mkdir -p "$dir"
  start_local_shards "$bin" "$dir" 2 --optimizer=adamw --lr="$4" --warmup_steps=20 \
      --weight_decay=0.01 -- --epochs="$2" --units_per_epoch="$3" --worker_lease_s=4 \
      --unit_lease_s=30
}
# start_trainer NAME INDEX MODEL DATA [FLAG...]
start_trainer() {
  local name=$1 index=$2 model=$3 data=$4
  shift 4
  "$bin/spotps-trainer" --ps="$shard_addresses" --model="$model" --data="$data" \
      --batch="$BATCH" --seq_len="$SEQ_LEN" --threads="$threads" --worker_index="$index" \
      --log_every=50 "$@" > "$work/$name/trainer$index.log" 2>&1 &
  trainer_pids+=($!)
}
ctl() { "$bin/spotps-ctl" --ps="$shard_addresses" "$@"; }
# Every unit committed, from the coordinator: committed and units summed.
units_of() {
  ctl status --json --sample_s=0 | "$py" -c '
import json, sys
c = json.load(sys.stdin)["coordinator"]["epochs"]
print(sum(int(e["units"]) for e in c), sum(int(e["committed"]) for e in c))'
}

if [ -n "$PRETRAINED" ]; then
  say "a, b. pretrained weights from $PRETRAINED"
  cp "$PRETRAINED" "$work/pretrained.safetensors.tmp" &&
    mv "$work/pretrained.safetensors.tmp" "$work/pretrained.safetensors"
else
  say "a. pretraining a language model for ${PRETRAIN_SECONDS}s: $WORKERS trainers, 2 shards"
  start_job pretrain 100 100000 "$LR"
  for i in $(seq 0 $((WORKERS - 1))); do
    start_trainer pretrain "$i" "$work/lm.pt" "$work/pretrain.tokens" \
        --max_seconds="$PRETRAIN_SECONDS" --eval_batches=8
  done
  for pid in "${trainer_pids[@]}"; do wait_for_child "$pid"; done
  trainer_pids=()
  grep -h '^summary: ' "$work"/pretrain/trainer*.log | sed 's/^/[finetune]   /' | cut -c1-160

  say "b. exporting the pretrained weights"
  ctl export --names=module --out="$work/pretrained.safetensors"
  stop_all
fi

examples=$(sed -n 's/.*: \([0-9]*\) train + .*/\1/p' "$work/labeled.log")
# A fine-tuning epoch passes over the training examples once, unless
# --units_per_epoch sets another budget (a unit is a batch, drawn at
# random).
units=$(( examples / BATCH ))
[ "$UNITS_PER_EPOCH" -gt 0 ] && units=$UNITS_PER_EPOCH
# finetune_job NAME [FLAG...]: the classifier for EPOCHS of `units` units.
finetune_job() {
  local name=$1
  shift
  start_job "$name" "$EPOCHS" "$units" "$FINETUNE_LR"
  for i in $(seq 0 $((WORKERS - 1))); do
    start_trainer "$name" "$i" "$work/classifier.pt" "$work/labeled.examples" --eval_batches=0 "$@"
  done
}

say "c. fine-tuning the classifier from the pretrained weights: $EPOCHS epochs of $units units"
finetune_job finetuned --init_from="$work/pretrained.safetensors"
total=$(( EPOCHS * units ))
until [ "$(units_of | awk '{print $2}')" -ge $(( total / 3 )) ]; do sleep 0.5; done
victim=${trainer_pids[1]}
if kill -KILL "$victim" 2> /dev/null; then
  wait "$victim" 2>/dev/null || true
  say "   trainer-1 killed (kill -9) with $(units_of | awk '{print $2}') of $total units committed"
else
  wait "$victim" 2>/dev/null || true  # Trainers leave once every unit is committed.
  say "   trainer-1 had already left: the job ended before the kill (give it more --units_per_epoch)"
fi
start_trainer finetuned "$WORKERS" "$work/classifier.pt" "$work/labeled.examples" \
    --eval_batches=0 --init_from="$work/pretrained.safetensors"
say "   trainer-$WORKERS joined"
ctl wait-done --timeout_s=3600 --print_every_s=30 | tail -n 1
read -r finetune_units finetune_committed <<< "$(units_of)"
"$bin/spotps-generate" --ps="$shard_addresses" --model="$work/classifier.pt" \
  --data="$work/labeled.examples" --eval_batches=1000 --batch=32 --threads="$(nproc)" \
  > "$work/finetuned/eval.log"
stop_all

say "d. the same classifier from scratch, for the same units"
finetune_job scratch
ctl wait-done --timeout_s=3600 --print_every_s=30 | tail -n 1
"$bin/spotps-generate" --ps="$shard_addresses" --model="$work/classifier.pt" \
  --data="$work/labeled.examples" --eval_batches=1000 --batch=32 --threads="$(nproc)" \
  > "$work/scratch/eval.log"
stop_all

field() { sed -n "s/.*$2=\\([0-9.]*\\).*/\\1/p" "$1" | tail -n 1; }
accuracy=$(field "$work/finetuned/eval.log" val_accuracy)
scratch=$(field "$work/scratch/eval.log" val_accuracy)
lost=$(( finetune_units - finetune_committed ))
echo
echo "| classifier ($TOPICS fortune topics) | validation accuracy | validation loss |"
echo "|---|---|---|"
echo "| fine-tuned from the pretrained LM | $accuracy | $(field "$work/finetuned/eval.log" val_loss) |"
echo "| from scratch, same units | $scratch | $(field "$work/scratch/eval.log" val_loss) |"
echo "| majority class | $majority | |"
echo
echo "finetune: accuracy=$accuracy scratch=$scratch majority=$majority units_lost=$lost"
