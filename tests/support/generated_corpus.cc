#include "tests/support/generated_corpus.h"

#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"

namespace spotps::testing {

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
  auto tokenize = ChildProcess::Start(
      {BinaryPath("spotps-tokenize"), "--input=" + text_path, "--output=" + tokens_path},
      dir + "/tokenize.log");
  if (!tokenize.ok()) return tokenize.status();
  absl::StatusOr<int> code = (*tokenize)->Wait(absl::Seconds(120));
  if (!code.ok()) return code.status();
  if (*code != 0) {
    return absl::InternalError(
        absl::StrCat("spotps-tokenize exited ", *code, "; see ", dir, "/tokenize.log"));
  }
  return tokens_path;
}

}  // namespace spotps::testing
