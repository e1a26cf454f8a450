#include "tests/support/generated_corpus.h"

#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"

namespace spotps::testing {
namespace {

constexpr absl::Duration kToolTimeout = absl::Minutes(5);

}  // namespace

std::string GeneratedText(size_t sentences) {
  const std::vector<std::string> subjects = {"the cat",   "a dog",    "the old man",
                                             "my sister", "the king", "a bird"};
  const std::vector<std::string> verbs = {"sees", "likes", "follows", "finds", "calls"};
  const std::vector<std::string> objects = {"the river", "a red apple", "the small house",
                                            "the moon", "a green field"};
  std::mt19937 rng(3);
  std::string text;
  for (size_t i = 0; i < sentences; ++i) {
    absl::StrAppend(&text, subjects[rng() % subjects.size()], " ", verbs[rng() % verbs.size()], " ",
                    objects[rng() % objects.size()], ".\n");
  }
  return text;
}

absl::StatusOr<std::string> MakeTokenFile(const std::string& dir, size_t sentences) {
  const std::string text_path = dir + "/corpus.txt";
  const std::string tokens_path = dir + "/corpus.tokens";
  if (absl::Status s = WriteFileAtomically(text_path, GeneratedText(sentences)); !s.ok()) return s;
  if (absl::Status s = RunToSuccess(
          {BinaryPath("spotps-tokenize"), "--input=" + text_path, "--output=" + tokens_path},
          dir + "/tokenize.log", kToolTimeout);
      !s.ok()) {
    return s;
  }
  return tokens_path;
}

std::string GeneratedLabeledRows(size_t rows) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> labels = {
      {"animal", {"the cat", "a dog", "a bird", "the horse"}},
      {"person", {"the old man", "my sister", "a farmer", "the child"}},
      {"royal", {"the king", "the queen", "a prince", "the duchess"}}};
  const std::vector<std::string> verbs = {"sees", "likes", "follows", "finds", "calls"};
  const std::vector<std::string> objects = {"the river", "a red apple", "the small house",
                                            "the moon", "a green field"};
  std::mt19937 rng(11);
  std::string tsv;
  for (size_t i = 0; i < rows; ++i) {
    const auto& [label, subjects] = labels[rng() % labels.size()];
    absl::StrAppend(&tsv, objects[rng() % objects.size()], " ", verbs[rng() % verbs.size()], " ",
                    subjects[rng() % subjects.size()], "\t", label, "\n");
  }
  return tsv;
}

absl::StatusOr<std::string> MakeLabeledFile(const std::string& dir, size_t rows, int seq_len) {
  const std::string tsv = dir + "/labeled.tsv";
  const std::string out = dir + "/labeled.examples";
  if (absl::Status s = WriteFileAtomically(tsv, GeneratedLabeledRows(rows)); !s.ok()) return s;
  if (absl::Status s = RunToSuccess(
          {BinaryPath("spotps-tokenize"), "--labeled", "--input=" + tsv, "--output=" + out,
           absl::StrCat("--seq_len=", seq_len), "--val_fraction=0.2"},
          dir + "/tokenize-labeled.log", kToolTimeout);
      !s.ok()) {
    return s;
  }
  return out;
}

absl::StatusOr<std::string> ExportModel(const std::string& dir, const std::string& name,
                                        const std::vector<std::string>& flags) {
  const std::string path = absl::StrCat(dir, "/", name, ".pt");
  std::vector<std::string> argv = {"/usr/bin/python3",
                                   SPOTPS_SOURCE_DIR "/tools/models/export_model.py",
                                   "--out=" + path};
  argv.insert(argv.end(), flags.begin(), flags.end());
  if (absl::Status s =
          RunToSuccess(argv, absl::StrCat(dir, "/export-", name, ".log"), kToolTimeout);
      !s.ok()) {
    return s;
  }
  return path;
}

}  // namespace spotps::testing
