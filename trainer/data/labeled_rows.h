// Labeled text as spotps-tokenize --labeled reads it: one example per
// line, in one of two formats.
//
// TSV (.tsv): `text<TAB>label`. In both fields a backslash escapes: \t is a
// tab, \n a newline, \r a carriage return, \\ a backslash; any other
// backslash sequence, and a second unescaped tab, make a bad row. A first
// line that reads exactly `text<TAB>label` is a header and skipped. A
// carriage return ending a line (CRLF files) is dropped.
// JSONL (.jsonl): a JSON object per line with a string "text" and a
// "label" that is a string or an integer (taken as its decimal text);
// other keys are ignored.
//
// In either, a row is bad if its line is not valid UTF-8, its text is
// empty, or its label is empty or longer than kMaxLabelBytes. Every line
// is a row, so an empty line is a bad row too.

#ifndef SPOTPS_TRAINER_DATA_LABELED_ROWS_H_
#define SPOTPS_TRAINER_DATA_LABELED_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

inline constexpr size_t kMaxLabelBytes = 256;

enum class LabeledFormat { kTsv, kJsonl };

// The format a file name's extension says (.tsv or .jsonl); InvalidArgument
// otherwise.
absl::StatusOr<LabeledFormat> LabeledFormatOfPath(absl::string_view path);

struct LabeledRow {
  int64_t line = 0;  // 1-based.
  std::string text;
  std::string label;
};

struct BadRow {
  int64_t line = 0;
  std::string reason;
};

struct LabeledRows {
  std::vector<LabeledRow> rows;
  std::vector<BadRow> bad_rows;  // In line order.
};

// Every line of `contents` as a row or a bad row (never both).
LabeledRows ParseLabeledRows(absl::string_view contents, LabeledFormat format);

// The TSV field that reads back as `field` (the escapes above), for
// writers of TSV files.
std::string EscapeTsvField(absl::string_view field);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_LABELED_ROWS_H_
