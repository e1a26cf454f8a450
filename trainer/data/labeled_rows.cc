#include "trainer/data/labeled_rows.h"

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "trainer/data/utf8.h"

namespace spotps {
namespace {

constexpr absl::string_view kTsvHeader = "text\tlabel";

// Undoes EscapeTsvField; false (with *error set) for an unknown escape.
bool UnescapeTsvField(absl::string_view field, std::string* out, std::string* error) {
  out->clear();
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\') {
      out->push_back(field[i]);
      continue;
    }
    const char escaped = i + 1 < field.size() ? field[i + 1] : '\0';
    switch (escaped) {
      case 't':
        out->push_back('\t');
        break;
      case 'n':
        out->push_back('\n');
        break;
      case 'r':
        out->push_back('\r');
        break;
      case '\\':
        out->push_back('\\');
        break;
      default:
        *error = i + 1 < field.size()
                     ? absl::StrCat("unknown escape \"\\", std::string(1, escaped),
                                    "\" (only \\t \\n \\r \\\\ are escapes)")
                     : "a lone backslash ends the field (write \\\\ for a backslash)";
        return false;
    }
    ++i;
  }
  return true;
}

// Fills row's text and label from a TSV line; returns the reason if bad.
std::string ReadTsvRow(absl::string_view line, LabeledRow* row) {
  const std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
  if (fields.size() < 2) return "no TAB between the text and the label";
  if (fields.size() > 2) {
    return absl::StrCat(fields.size() - 1,
                        " TABs; a row is text<TAB>label (write a tab in the text as \\t)");
  }
  std::string error;
  if (!UnescapeTsvField(fields[0], &row->text, &error)) return absl::StrCat("text: ", error);
  if (!UnescapeTsvField(fields[1], &row->label, &error)) return absl::StrCat("label: ", error);
  return "";
}

std::string ReadJsonlRow(absl::string_view line, LabeledRow* row) {
  const nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return "not valid JSON";
  if (!json.is_object()) return "not a JSON object";
  const auto text = json.find("text");
  if (text == json.end() || !text->is_string()) return "no string \"text\"";
  const auto label = json.find("label");
  if (label == json.end()) return "no \"label\"";
  if (label->is_string()) {
    row->label = label->get<std::string>();
  } else if (label->is_number_integer()) {
    row->label = label->dump();
  } else {
    return "\"label\" is neither a string nor an integer";
  }
  row->text = text->get<std::string>();
  return "";
}

// The reason a row is bad, or "" if it is fine.
std::string ReadRow(absl::string_view line, LabeledFormat format, LabeledRow* row) {
  if (absl::Status utf8 = CheckUtf8(line); !utf8.ok()) return std::string(utf8.message());
  if (line.empty()) return "empty line";
  std::string reason =
      format == LabeledFormat::kTsv ? ReadTsvRow(line, row) : ReadJsonlRow(line, row);
  if (!reason.empty()) return reason;
  if (row->text.empty()) return "empty text";
  if (row->label.empty()) return "empty label";
  if (row->label.size() > kMaxLabelBytes) {
    return absl::StrCat("label of ", row->label.size(), " bytes, over the limit of ",
                        kMaxLabelBytes);
  }
  return "";
}

}  // namespace

absl::StatusOr<LabeledFormat> LabeledFormatOfPath(absl::string_view path) {
  if (absl::EndsWith(path, ".tsv")) return LabeledFormat::kTsv;
  if (absl::EndsWith(path, ".jsonl")) return LabeledFormat::kJsonl;
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": labeled input must be a .tsv or .jsonl file"));
}

LabeledRows ParseLabeledRows(absl::string_view contents, LabeledFormat format) {
  LabeledRows result;
  std::vector<absl::string_view> lines = absl::StrSplit(contents, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // The final newline.
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view line = lines[i];
    absl::ConsumeSuffix(&line, "\r");
    if (i == 0 && format == LabeledFormat::kTsv && line == kTsvHeader) continue;
    LabeledRow row;
    row.line = static_cast<int64_t>(i) + 1;
    std::string reason = ReadRow(line, format, &row);
    if (reason.empty()) {
      result.rows.push_back(std::move(row));
    } else {
      result.bad_rows.push_back({row.line, std::move(reason)});
    }
  }
  return result;
}

std::string EscapeTsvField(absl::string_view field) {
  std::string out;
  for (char c : field) {
    switch (c) {
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace spotps
