// Training text the tests and benchmarks make themselves: sentences from a
// tiny grammar, tokenized by the real spotps-tokenize binary.
#ifndef SPOTPS_TESTS_SUPPORT_GENERATED_CORPUS_H_
#define SPOTPS_TESTS_SUPPORT_GENERATED_CORPUS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace spotps::testing {

// `sentences` lines like "the old man finds a red apple.", from a fixed seed.
std::string GeneratedText(size_t sentences);

// Writes GeneratedText(sentences) into `dir` and tokenizes it with
// spotps-tokenize; returns the token file's path.
absl::StatusOr<std::string> MakeTokenFile(const std::string& dir, size_t sentences);

// `rows` lines "text<TAB>label" of the same grammar, labeled by who the
// subject is (animal, person or royal), from a fixed seed: a classifier
// must learn which words decide the label.
std::string GeneratedLabeledRows(size_t rows);

// Writes GeneratedLabeledRows(rows) into `dir` as a TSV and makes a
// labeled-example file of `seq_len` byte tokens with spotps-tokenize
// --labeled; returns its path.
absl::StatusOr<std::string> MakeLabeledFile(const std::string& dir, size_t rows, int seq_len);

// Writes a model with tools/models/export_model.py (Debian's
// /usr/bin/python3 and torch) into dir/NAME.pt, passing `flags` (e.g.
// "--arch=llama"); returns its path.
absl::StatusOr<std::string> ExportModel(const std::string& dir, const std::string& name,
                                        const std::vector<std::string>& flags);

}  // namespace spotps::testing

#endif  // SPOTPS_TESTS_SUPPORT_GENERATED_CORPUS_H_
