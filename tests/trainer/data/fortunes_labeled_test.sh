#!/usr/bin/env bash
# The fine-tuning job's data end to end: deploy/local/fortunes_to_tsv.py on
# the real fortunes package, then spotps-tokenize --labeled with each kind
# of tokenizer; and the command line's answers to bad labeled input.
#
#   fortunes_labeled_test.sh SOURCE_DIR PATH/TO/spotps-tokenize
set -uo pipefail

source_dir=$1
tokenize=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }
expect() {  # NAME COMMAND...: passes if COMMAND succeeds.
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}

tsv=$work/fortunes.tsv
if python3 "$source_dir/deploy/local/fortunes_to_tsv.py" --top_k 5 "$tsv" > "$work/script.log"; then
  pass "fortunes_to_tsv.py runs: $(cat "$work/script.log")"
else
  fail "fortunes_to_tsv.py failed"
  echo "0 passed, 1 failed"
  exit 1
fi
expect "the TSV starts with its header" test "$(head -n 1 "$tsv")" = $'text\tlabel'
labels=$(tail -n +2 "$tsv" | awk -F'\t' '{print $NF}' | sort -u | wc -l)
expect "5 topics label the rows (got $labels)" test "$labels" -eq 5
expect "every row is text<TAB>label" test "$(awk -F'\t' 'NF != 2' "$tsv" | wc -l)" -eq 0
expect "thousands of fortunes" test "$(wc -l < "$tsv")" -gt 3000
expect "the TSV is readable by others" test "$(stat -c %a "$tsv")" = 644
if python3 "$source_dir/deploy/local/fortunes_to_tsv.py" --top_k 4 "$work/x.tsv" 2> /dev/null; then
  fail "--top_k 4 is refused"
else
  pass "--top_k 4 is refused"
fi

for tokenizer in byte gpt2 sp:1000; do
  out=$work/fortunes.${tokenizer%%:*}.labeled
  if "$tokenize" --labeled --input="$tsv" --output="$out" --tokenizer="$tokenizer" \
      --seq_len=64 --val_fraction=0.1 > "$work/tokenize.log" 2>&1; then
    pass "--labeled --tokenizer=$tokenizer: $(cat "$work/tokenize.log")"
  else
    fail "--labeled --tokenizer=$tokenizer: $(cat "$work/tokenize.log")"
  fi
  expect "$tokenizer: 5 labels, validation examples of each" \
    grep -Eq '5 labels \(train/validation: ([a-z-]+ [0-9]+/[1-9][0-9]*(, |\)))+' "$work/tokenize.log"
done
expect "sp:N saves its model beside the file" test -s "$work/fortunes.sp.labeled.spm"
expect "the file names its model" grep -q "fortunes.sp.labeled.spm" "$work/fortunes.sp.labeled"

# Bad rows: refused with exit 2 and their line numbers, or skipped when asked.
bad=$work/bad.tsv
{ head -n 50 "$tsv"; printf 'no label\n'; printf 'once\tlonely\n'; tail -n 50 "$tsv"; } > "$bad"
"$tokenize" --labeled --input="$bad" --output="$work/bad.labeled" > /dev/null 2> "$work/bad.log"
status=$?
expect "a file with bad rows exits 2 (got $status)" test "$status" -eq 2
expect "the message names line 51" grep -q "bad.tsv:51: no TAB" "$work/bad.log"
expect "the message names line 52's lonely label" grep -q "bad.tsv:52: label \"lonely\"" "$work/bad.log"
expect "nothing is written" test ! -e "$work/bad.labeled"
expect "--skip_bad_rows writes it, counting 2" \
  sh -c "'$tokenize' --labeled --skip_bad_rows --input='$bad' --output='$work/bad.labeled' | grep -q '2 bad rows skipped'"
"$tokenize" --labeled --input="$work/missing.tsv" --output="$work/m.labeled" 2> /dev/null
expect "a missing input exits 1" test $? -eq 1
"$tokenize" --labeled --input="$bad" --output="$work/x" --tokenizer=bpe 2> /dev/null
expect "an unknown tokenizer exits 2" test $? -eq 2

echo "$passed passed, $failed failed"
test "$failed" -eq 0
