#!/usr/bin/env python3
"""Turns Debian's fortunes package into labeled text for fine-tuning.

Usage: fortunes_to_tsv.py [--top_k K] [--per_topic N] [--fortunes_dir DIR] [--rest REST.txt]
                          OUTPUT.tsv

Each fortune of the K topic files with the most fortunes (K >= 5) becomes a
row `text<TAB>topic` of a TSV file that `spotps-tokenize --labeled` reads
(trainer/data/labeled_rows.h): a `text<TAB>label` header, then one row a
fortune, with tabs, newlines, carriage returns and backslashes in the text
written \\t, \\n, \\r and \\\\. Topic files are the files of DIR (default
/usr/share/games/fortunes) that are not the strfile indexes (.dat) or the
UTF-8 links (.u8); fortunes in them are separated by lines holding only
`%`. Empty fortunes are left out, as are files that are not UTF-8. With
--per_topic N, only N fortunes of each topic (drawn with a fixed seed) are
labeled: the few labels a fine-tuning job often has. With --rest, every
fortune not labeled (the other topics', and the chosen topics' beyond N) goes
to REST.txt as plain text, one blank line between fortunes: text to pretrain
a language model on that holds nothing of the labeled rows. Outputs are
written atomically (temporary file, fsync, rename).
"""

import argparse
import os
import random
import sys
import tempfile


def escape_tsv_field(field):
    return (field.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
            .replace("\r", "\\r"))


def read_fortunes(path):
    """The non-empty fortunes of one file, or None if it is not UTF-8 text."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        return None
    fortunes, current = [], []
    for line in text.split("\n"):
        if line == "%":
            fortunes.append("\n".join(current))
            current = []
        else:
            current.append(line)
    fortunes.append("\n".join(current))
    return [f.strip("\n") for f in fortunes if f.strip()]


def topic_files(directory):
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.endswith((".dat", ".u8")) or name.startswith(".") or not os.path.isfile(path):
            continue
        yield name, path


def write_atomically(path, text):
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + ".tmp.")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(temporary, 0o666 & ~umask)  # As open() would make it, not mkstemp's 0600.
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.rename(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output")
    parser.add_argument("--top_k", type=int, default=8,
                        help="how many topics, those with the most fortunes (at least 5)")
    parser.add_argument("--fortunes_dir", default="/usr/share/games/fortunes")
    parser.add_argument("--per_topic", type=int, default=0,
                        help="label only this many fortunes of each topic (0: all)")
    parser.add_argument("--rest", help="also write the unlabeled fortunes here, as text")
    args = parser.parse_args()
    if args.top_k < 5:
        parser.error(f"--top_k must be at least 5, got {args.top_k}")
    if not os.path.isdir(args.fortunes_dir):
        print(f"fortunes_to_tsv: {args.fortunes_dir} not found; apt-get install fortunes",
              file=sys.stderr)
        return 1
    topics = []
    for name, path in topic_files(args.fortunes_dir):
        fortunes = read_fortunes(path)
        if fortunes is None:
            print(f"fortunes_to_tsv: skipping {path}: not UTF-8", file=sys.stderr)
        elif fortunes:
            topics.append((name, fortunes))
    if len(topics) < args.top_k:
        print(f"fortunes_to_tsv: only {len(topics)} topics in {args.fortunes_dir}, "
              f"fewer than --top_k={args.top_k}", file=sys.stderr)
        return 1
    # Most fortunes first; equal counts in name order, so the choice is fixed.
    topics.sort(key=lambda topic: (-len(topic[1]), topic[0]))
    chosen = sorted(topics[:args.top_k])
    unlabeled = [text for _, fortunes in topics[args.top_k:] for text in fortunes]
    if args.per_topic > 0:
        rng = random.Random(7)
        labeled = []
        for name, fortunes in chosen:
            order = list(range(len(fortunes)))
            rng.shuffle(order)
            keep = set(order[:args.per_topic])
            labeled.append((name, [t for i, t in enumerate(fortunes) if i in keep]))
            unlabeled.extend(t for i, t in enumerate(fortunes) if i not in keep)
        chosen = labeled
    rows = ["text\tlabel"]
    for name, fortunes in chosen:
        rows.extend(f"{escape_tsv_field(text)}\t{name}" for text in fortunes)
    write_atomically(args.output, "\n".join(rows) + "\n")
    if args.rest:
        write_atomically(args.rest, "\n\n".join(unlabeled) + "\n")
        print(f"fortunes_to_tsv: wrote {args.rest}: {len(unlabeled)} unlabeled fortunes")
    counts = ", ".join(f"{name} {len(fortunes)}" for name, fortunes in chosen)
    print(f"fortunes_to_tsv: wrote {args.output}: {len(rows) - 1} fortunes in "
          f"{len(chosen)} topics ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
