#include "trainer/data/labeled_builder.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "trainer/data/labeled_rows.h"
#include "trainer/data/stratified_split.h"
#include "trainer/data/tokenizer_factory.h"

namespace spotps {
namespace {

constexpr size_t kMaxBadRowsShown = 20;

absl::Status CheckOptions(const LabeledBuildOptions& options) {
  if (options.seq_len <= 0 || options.seq_len > kMaxLabeledSeqLen) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seq_len must be in [1, ", kMaxLabeledSeqLen, "], got ", options.seq_len));
  }
  if (!(options.val_fraction >= 0.0 && options.val_fraction < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--val_fraction must be in [0, 1), got ", options.val_fraction));
  }
  return absl::OkStatus();
}

// Moves rows whose label no other row has to the bad rows.
void RejectSingletonLabels(LabeledRows& parsed) {
  absl::flat_hash_map<std::string, int64_t> counts;
  for (const LabeledRow& row : parsed.rows) ++counts[row.label];
  std::vector<LabeledRow> kept;
  for (LabeledRow& row : parsed.rows) {
    if (counts[row.label] > 1) {
      kept.push_back(std::move(row));
    } else {
      parsed.bad_rows.push_back(
          {row.line, absl::StrCat("label \"", row.label,
                                  "\" is on this row only; a label needs 2 examples to be "
                                  "both trained and validated (a typo?)")});
    }
  }
  parsed.rows = std::move(kept);
  std::sort(parsed.bad_rows.begin(), parsed.bad_rows.end(),
            [](const BadRow& a, const BadRow& b) { return a.line < b.line; });
}

absl::Status RefuseBadRows(const std::string& input_path, const std::vector<BadRow>& bad_rows) {
  std::string message = absl::StrCat(input_path, ": ", bad_rows.size(), " bad row",
                                     bad_rows.size() == 1 ? "" : "s",
                                     " (fix them, or drop them with --skip_bad_rows):");
  for (size_t i = 0; i < std::min(bad_rows.size(), kMaxBadRowsShown); ++i) {
    absl::StrAppend(&message, "\n  ", input_path, ":", bad_rows[i].line, ": ",
                    bad_rows[i].reason);
  }
  if (bad_rows.size() > kMaxBadRowsShown) {
    absl::StrAppend(&message, "\n  ... and ", bad_rows.size() - kMaxBadRowsShown, " more");
  }
  return absl::InvalidArgumentError(message);
}

// The sorted label names and each row's label id.
std::vector<std::string> LabelIds(const std::vector<LabeledRow>& rows,
                                  std::vector<int32_t>* row_labels) {
  std::map<std::string, int32_t> ids;
  for (const LabeledRow& row : rows) ids.emplace(row.label, 0);
  std::vector<std::string> names;
  for (auto& [name, id] : ids) {
    id = static_cast<int32_t>(names.size());
    names.push_back(name);
  }
  for (const LabeledRow& row : rows) row_labels->push_back(ids[row.label]);
  return names;
}

}  // namespace

std::string LabeledBuildReport::Summary() const {
  std::vector<std::string> per_label;
  for (size_t l = 0; l < header.label_names.size(); ++l) {
    per_label.push_back(absl::StrCat(header.label_names[l], " ", train_per_label[l], "/",
                                     val_per_label[l]));
  }
  return absl::StrCat(header.num_train, " train + ", header.num_val, " validation examples, ",
                      header.label_names.size(), " labels (train/validation: ",
                      absl::StrJoin(per_label, ", "), "), tokenizer ",
                      TokenizerKindName(header.tokenizer.kind), ", seq_len ", header.seq_len,
                      ", padding id ", header.padding_id, ", ", truncated_examples,
                      " truncated, ", skipped_rows, " bad rows skipped");
}

absl::StatusOr<LabeledBuildReport> BuildLabeledFile(const std::string& input_path,
                                                    const std::string& output_path,
                                                    const LabeledBuildOptions& options,
                                                    const TokenizerMaker& make_tokenizer) {
  if (absl::Status status = CheckOptions(options); !status.ok()) return status;
  absl::StatusOr<LabeledFormat> format = LabeledFormatOfPath(input_path);
  if (!format.ok()) return format.status();
  absl::StatusOr<std::string> contents = ReadFile(input_path);
  if (!contents.ok()) return contents.status();
  LabeledRows parsed = ParseLabeledRows(*contents, *format);
  if (options.val_fraction > 0) RejectSingletonLabels(parsed);
  if (!parsed.bad_rows.empty() && !options.skip_bad_rows) {
    return RefuseBadRows(input_path, parsed.bad_rows);
  }
  std::vector<int32_t> row_labels;
  LabeledBuildReport report;
  report.skipped_rows = static_cast<int64_t>(parsed.bad_rows.size());
  report.header.label_names = LabelIds(parsed.rows, &row_labels);
  if (report.header.label_names.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        input_path, ": ", parsed.rows.size(), " usable rows with ",
        report.header.label_names.size(), " labels; a classifier needs at least 2 labels"));
  }
  const int32_t num_labels = static_cast<int32_t>(report.header.label_names.size());
  const std::vector<bool> is_validation =
      StratifiedValidationSplit(row_labels, num_labels, options.val_fraction, options.split_seed);

  std::vector<absl::string_view> train_texts;
  for (size_t i = 0; i < parsed.rows.size(); ++i) {
    if (!is_validation[i]) train_texts.push_back(parsed.rows[i].text);
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = make_tokenizer(train_texts);
  if (!tokenizer.ok()) return tokenizer.status();
  if (!options.train_text_path.empty()) {
    if (absl::Status s = WriteFileAtomically(options.train_text_path,
                                             absl::StrCat(absl::StrJoin(train_texts, "\n\n"), "\n"));
        !s.ok()) {
      return s;
    }
  }

  std::vector<LabeledExample> train, validation;
  report.train_per_label.assign(num_labels, 0);
  report.val_per_label.assign(num_labels, 0);
  for (size_t i = 0; i < parsed.rows.size(); ++i) {
    LabeledExample example;
    example.label = row_labels[i];
    if (absl::Status status = (*tokenizer)->Encode(parsed.rows[i].text, example.ids);
        !status.ok()) {
      return absl::Status(status.code(), absl::StrCat(input_path, ":", parsed.rows[i].line,
                                                      ": ", status.message()));
    }
    if (example.ids.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(input_path, ":", parsed.rows[i].line, ": the text has no tokens"));
    }
    if (example.ids.size() > static_cast<size_t>(options.seq_len)) {
      example.ids.resize(options.seq_len);
      ++report.truncated_examples;
    }
    ++(is_validation[i] ? report.val_per_label : report.train_per_label)[example.label];
    (is_validation[i] ? validation : train).push_back(std::move(example));
  }

  absl::StatusOr<std::string> model_file = SaveModelBeside(**tokenizer, output_path);
  if (!model_file.ok()) return model_file.status();
  report.header.tokenizer = IdentityOf(**tokenizer, *model_file);
  report.header.seq_len = static_cast<uint32_t>(options.seq_len);
  report.header.padding_id = static_cast<uint32_t>((*tokenizer)->padding_id());
  absl::StatusOr<LabeledFileHeader> written =
      WriteLabeledFile(output_path, report.header, train, validation);
  if (!written.ok()) return written.status();
  report.header = *std::move(written);
  return report;
}

}  // namespace spotps
