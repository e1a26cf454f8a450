# Sourced by the shell tests: the small generated corpus that the C++ tests
# get from tests/support/generated_corpus (same grammar: a few subjects,
# verbs and objects), tokenized by spotps-tokenize.
#
#   make_test_corpus BIN_DIR WORK_DIR   -> WORK_DIR/corpus.tokens
#
# Returns non-zero, with the tokenizer's log on stderr, if spotps-tokenize fails.
make_test_corpus() {
  local bin=$1 work=$2
  awk 'BEGIN {
    srand(3)
    n = split("the cat|a dog|the old man|my sister|the king|a bird", s, "|")
    m = split("sees|likes|follows|finds|calls", v, "|")
    k = split("the river|a red apple|the small house|the moon|a green field", o, "|")
    for (i = 0; i < 5000; i++)
      printf "%s %s %s.\n", s[int(rand() * n) + 1], v[int(rand() * m) + 1], o[int(rand() * k) + 1]
  }' > "$work/corpus.txt"
  "$bin/spotps-tokenize" --input="$work/corpus.txt" --output="$work/corpus.tokens" \
      > "$work/tokenize.log" 2>&1 || { cat "$work/tokenize.log" >&2; return 1; }
}
