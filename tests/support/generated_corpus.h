// Training text the tests and benchmarks make themselves: sentences from a
// tiny grammar, tokenized by the real spotps-tokenize binary.
#ifndef SPOTPS_TESTS_SUPPORT_GENERATED_CORPUS_H_
#define SPOTPS_TESTS_SUPPORT_GENERATED_CORPUS_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace spotps::testing {

// `sentences` lines like "the old man finds a red apple.", from a fixed seed.
std::string GeneratedText(size_t sentences);

// Writes GeneratedText(sentences) into `dir` and tokenizes it with
// spotps-tokenize; returns the token file's path.
absl::StatusOr<std::string> MakeTokenFile(const std::string& dir, size_t sentences);

}  // namespace spotps::testing

#endif  // SPOTPS_TESTS_SUPPORT_GENERATED_CORPUS_H_
