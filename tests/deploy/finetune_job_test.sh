#!/usr/bin/env bash
# deploy.FinetuneJob: deploy/local/finetune.sh as a user runs it, on small
# settings: a SentencePiece vocabulary trained on fortunes and the KJV, a
# GPT-2-style TorchScript decoder pretrained through 2 shards, exported, a
# classifier fine-tuned from it while one trainer is killed (kill -9) and
# another joins, and one trained from scratch. Checks every unit committed,
# the kill and the join happened, the classifier started from the pretrained
# weights and beats the majority class by 0.1, and the last line's form.
#
#   tests/deploy/finetune_job_test.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "[finetune-test] FAIL: $*" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/spotps-finetune-test-XXXXXX")
cleanup() {
  local status=$?
  if [ $status -ne 0 ]; then
    for f in "$work"/job.log "$work"/*/*.log; do
      [ -f "$f" ] && { echo "== $f"; tail -n 8 "$f"; }
    done >&2
  fi
  rm -rf "$work"
  exit $status
}
trap cleanup EXIT

# 300 units: enough that a fast machine is still training when the test
# kills a trainer at a third of them.
"$repo/deploy/local/finetune.sh" --pretrain_seconds=20 --epochs=1 --units_per_epoch=300 \
  --d_model=64 --n_layer=2 \
  --seq_len=64 --vocab=1000 --work_dir="$work" > "$work/job.log" 2>&1 ||
  fail "finetune.sh exited $?"
grep -q "trainer-1 killed (kill -9)" "$work/job.log" || fail "no trainer was killed"
grep -q "trainer-2 joined" "$work/job.log" || fail "no trainer joined"
grep -q "initial weights from .*pretrained.safetensors: [0-9]* of [0-9]* tensors; kept the file's own for head.weight, head.bias" \
  "$work"/finetuned/trainer0.log || fail "the classifier did not start from the pretrained weights"
line=$(tail -n 1 "$work/job.log")
echo "$line"
[[ "$line" =~ ^finetune:\ accuracy=([0-9.]+)\ scratch=([0-9.]+)\ majority=([0-9.]+)\ units_lost=([0-9]+)$ ]] ||
  fail "last line: $line"
[ "${BASH_REMATCH[4]}" -eq 0 ] || fail "${BASH_REMATCH[4]} units lost"
awk -v a="${BASH_REMATCH[1]}" -v s="${BASH_REMATCH[2]}" -v m="${BASH_REMATCH[3]}" \
  'BEGIN { exit !(a > m + 0.1 && s > m - 0.05) }' ||
  fail "the fine-tuned classifier is not 0.1 above the majority class, or the one from scratch broke"
