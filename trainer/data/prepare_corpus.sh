#!/bin/bash
# Builds the default training corpus: the King James Bible from Debian's
# bible-kjv package, one verse per line (about 4.4 MB), tokenized for the
# trainer.
#
#   trainer/data/prepare_corpus.sh OUTPUT_DIR [PATH_TO_SPOTPS_TOKENIZE]
#
# Writes OUTPUT_DIR/kjv.txt and OUTPUT_DIR/kjv.tokens. Each step is skipped
# when its output is already there (and, for the tokens, newer than the
# text), so rerunning is cheap. spotps-tokenize is looked up in the argument,
# $SPOTPS_TOKENIZE, build/bin, build-trainer/bin, then $PATH.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 OUTPUT_DIR [PATH_TO_SPOTPS_TOKENIZE]" >&2
  exit 2
fi
out_dir=$1
text=$out_dir/kjv.txt
tokens=$out_dir/kjv.tokens
repo=$(cd "$(dirname "$0")/../.." && pwd)  # trainer/data/ -> the repository

find_tokenizer() {
  for candidate in "${1:-}" "${SPOTPS_TOKENIZE:-}" \
      "$repo/build/bin/spotps-tokenize" \
      "$repo/build-trainer/bin/spotps-tokenize" \
      "$(command -v spotps-tokenize || true)"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then
      echo "$candidate"
      return 0
    fi
  done
  echo "prepare_corpus: spotps-tokenize not found; build it or pass its path" >&2
  return 1
}

mkdir -p "$out_dir"

if [ -s "$text" ]; then
  echo "prepare_corpus: $text already exists, keeping it"
else
  if ! command -v bible >/dev/null 2>&1; then
    echo "prepare_corpus: 'bible' not found; apt-get install bible-kjv" >&2
    exit 1
  fi
  # COLUMNS would change bible's line wrapping, and with it the corpus.
  env -u COLUMNS bible -f "Gen1:1-Rev22:21" > "$text.tmp"
  mv "$text.tmp" "$text"
  echo "prepare_corpus: wrote $text ($(wc -c < "$text") bytes)"
fi

if [ -s "$tokens" ] && [ "$tokens" -nt "$text" ]; then
  echo "prepare_corpus: $tokens is up to date"
else
  tokenizer=$(find_tokenizer "${2:-}")
  "$tokenizer" --input="$text" --output="$tokens" --val_fraction=0.05
fi
