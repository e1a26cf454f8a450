// Labeled text (labeled_rows.h) to a labeled-example file (labeled_file.h):
// checks every row, maps labels to ids, splits validation by label,
// tokenizes, truncates and pads. What spotps-tokenize --labeled runs.

#ifndef SPOTPS_TRAINER_DATA_LABELED_BUILDER_H_
#define SPOTPS_TRAINER_DATA_LABELED_BUILDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trainer/data/labeled_file.h"
#include "trainer/data/tokenizer.h"

namespace spotps {

struct LabeledBuildOptions {
  int64_t seq_len = 128;
  double val_fraction = 0.1;  // Of each label's examples; in [0, 1).
  uint64_t split_seed = 0;
  // Drop bad rows (and count them) instead of refusing the file.
  bool skip_bad_rows = false;
  // If set, the texts of the training split (no labels, a blank line
  // between them) are written here too: text to pretrain a language model
  // on before fine-tuning (domain-adaptive pretraining) that holds nothing
  // of the validation split.
  std::string train_text_path;
};

struct LabeledBuildReport {
  LabeledFileHeader header;  // As written.
  std::vector<int64_t> train_per_label;  // By label id.
  std::vector<int64_t> val_per_label;
  int64_t skipped_rows = 0;
  int64_t truncated_examples = 0;  // Texts longer than seq_len tokens.

  // One line: examples, labels with their counts, truncation, skipped rows.
  std::string Summary() const;
};

// Makes the tokenizer once the train texts are known (sp:N trains on them).
using TokenizerMaker = std::function<absl::StatusOr<std::unique_ptr<Tokenizer>>(
    absl::Span<const absl::string_view> train_texts)>;

// Reads `input_path` (.tsv or .jsonl), writes `output_path` and, for
// SentencePiece, its model as output_path + ".spm". A row is bad for the
// reasons labeled_rows.h gives, and also when its label occurs on no other
// row while val_fraction > 0: such a label could never be both trained and
// validated, and is most often a typo. Unless skip_bad_rows, any bad row
// refuses the file: InvalidArgument naming each (up to 20) as FILE:LINE.
// Label ids follow the names' byte order; examples keep the input's order
// within each split.
absl::StatusOr<LabeledBuildReport> BuildLabeledFile(const std::string& input_path,
                                                    const std::string& output_path,
                                                    const LabeledBuildOptions& options,
                                                    const TokenizerMaker& make_tokenizer);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_LABELED_BUILDER_H_
