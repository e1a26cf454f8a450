#include "trainer/data/labeled_file.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/little_endian.h"
#include "trainer/data/framed_file.h"
#include "trainer/data/token_file.h"

namespace spotps {
namespace {

constexpr absl::string_view kMagic = "SPLABELS";
constexpr absl::string_view kWhat = "labeled-example file";
constexpr uint64_t kRecordPrefixBytes = 8;  // label, length.
constexpr uint64_t kMaxExamples = uint64_t{1} << 40;

std::string EncodeFields(const LabeledFileHeader& header) {
  std::string fields;
  PutTokenizerIdentity(header.tokenizer, &fields);
  PutU32(&fields, header.token_bytes);
  PutU32(&fields, header.max_token_id);
  PutU32(&fields, header.seq_len);
  PutU32(&fields, header.padding_id);
  PutU32(&fields, static_cast<uint32_t>(header.label_names.size()));
  for (const std::string& name : header.label_names) {
    PutU32(&fields, static_cast<uint32_t>(name.size()));
    fields += name;
  }
  PutU64(&fields, header.num_train);
  PutU64(&fields, header.num_val);
  return fields;
}

absl::Status CheckLabelNames(const std::vector<std::string>& names) {
  if (names.empty() || names.size() > kMaxLabeledClasses) {
    return absl::InvalidArgumentError(absl::StrCat("a labeled-example file needs 1 to ",
                                                   kMaxLabeledClasses, " labels, got ",
                                                   names.size()));
  }
  for (size_t i = 1; i < names.size(); ++i) {
    if (!(names[i - 1] < names[i])) {
      return absl::InvalidArgumentError(absl::StrCat("label names must be distinct and sorted: \"",
                                                     names[i - 1], "\" before \"", names[i], "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckExample(const LabeledFileHeader& header, const LabeledExample& example,
                          size_t index) {
  if (example.label >= header.label_names.size()) {
    return absl::InvalidArgumentError(absl::StrCat("example ", index, " has label ", example.label,
                                                   " of ", header.label_names.size()));
  }
  if (example.ids.empty() || example.ids.size() > header.seq_len) {
    return absl::InvalidArgumentError(absl::StrCat("example ", index, " has ", example.ids.size(),
                                                   " ids; it needs 1 to seq_len ", header.seq_len));
  }
  for (uint32_t id : example.ids) {
    if (id >= header.tokenizer.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("example ", index, " has id ", id,
                                                     ", outside the vocabulary of ",
                                                     header.tokenizer.vocab_size));
    }
  }
  return absl::OkStatus();
}

void AppendExample(const LabeledFileHeader& header, const LabeledExample& example,
                   std::string* payload) {
  PutU32(payload, example.label);
  PutU32(payload, static_cast<uint32_t>(example.ids.size()));
  AppendTokenIds(example.ids, header.token_bytes, payload);
  const std::vector<uint32_t> padding(header.seq_len - example.ids.size(), header.padding_id);
  AppendTokenIds(padding, header.token_bytes, payload);
}

absl::Status TakeFields(absl::string_view fields, LabeledFileHeader* header) {
  FieldCursor cursor(fields);
  if (absl::Status status = TakeTokenizerIdentity(cursor, kWhat, &header->tokenizer);
      !status.ok()) {
    return status;
  }
  uint32_t num_classes = 0;
  if (!cursor.U32(&header->token_bytes) || !cursor.U32(&header->max_token_id) ||
      !cursor.U32(&header->seq_len) || !cursor.U32(&header->padding_id) ||
      !cursor.U32(&num_classes)) {
    return absl::DataLossError("labeled-example file header is cut short");
  }
  if (num_classes == 0 || num_classes > kMaxLabeledClasses) {
    return absl::DataLossError(absl::StrCat("labeled-example file has ", num_classes, " labels"));
  }
  for (uint32_t i = 0; i < num_classes; ++i) {
    uint32_t length = 0;
    absl::string_view name;
    if (!cursor.U32(&length) || !cursor.Bytes(length, &name)) {
      return absl::DataLossError("labeled-example file header is cut short in its label names");
    }
    header->label_names.emplace_back(name);
  }
  if (!cursor.U64(&header->num_train) || !cursor.U64(&header->num_val)) {
    return absl::DataLossError("labeled-example file header is cut short");
  }
  return absl::OkStatus();
}

absl::Status CheckHeader(const LabeledFileHeader& header) {
  if (header.token_bytes != TokenIdBytes(header.tokenizer.vocab_size)) {
    return absl::DataLossError(absl::StrCat("labeled-example file stores ids in ",
                                            header.token_bytes, " bytes, not ",
                                            TokenIdBytes(header.tokenizer.vocab_size)));
  }
  if (header.seq_len == 0 || header.seq_len > kMaxLabeledSeqLen) {
    return absl::DataLossError(absl::StrCat("labeled-example file has seq_len ", header.seq_len));
  }
  if (header.padding_id >= header.tokenizer.vocab_size ||
      header.max_token_id >= header.tokenizer.vocab_size) {
    return absl::DataLossError("labeled-example file header has ids outside its vocabulary");
  }
  if (header.num_train > kMaxExamples || header.num_val > kMaxExamples) {
    return absl::DataLossError("labeled-example file header has absurd example counts");
  }
  if (absl::Status status = CheckLabelNames(header.label_names); !status.ok()) {
    return absl::DataLossError(absl::StrCat("labeled-example file: ", status.message()));
  }
  return absl::OkStatus();
}

// Every record: a known label, a length in [1, seq_len], padding after it,
// and the largest id the header's.
template <int kBytes>
absl::Status CheckRecords(const LabeledFileHeader& header, absl::Span<const uint8_t> payload) {
  const uint64_t record_bytes = LabeledRecordBytes(header);
  const uint64_t count = header.num_train + header.num_val;
  uint32_t largest = 0;
  for (uint64_t r = 0; r < count; ++r) {
    const uint8_t* record = payload.data() + r * record_bytes;
    const uint32_t label = DecodeU32(reinterpret_cast<const char*>(record));
    const uint32_t length = DecodeU32(reinterpret_cast<const char*>(record) + 4);
    const auto bad = [&](absl::string_view what) {
      return absl::DataLossError(absl::StrCat("labeled-example file is corrupt: example ", r,
                                              " (", r < header.num_train ? "train" : "validation",
                                              ") ", what));
    };
    if (label >= header.label_names.size()) return bad(absl::StrCat("has label ", label));
    if (length == 0 || length > header.seq_len) return bad(absl::StrCat("has length ", length));
    const uint8_t* ids = record + kRecordPrefixBytes;
    for (uint32_t t = 0; t < header.seq_len; ++t) {
      const uint32_t id = TokenIdAt<kBytes>(ids, t);
      if (t >= length && id != header.padding_id) return bad("has a token after its length");
      largest = std::max(largest, id);
    }
  }
  if (largest != header.max_token_id) {
    return absl::DataLossError(absl::StrCat("labeled-example file is corrupt: its largest id is ",
                                            largest, ", its header says ", header.max_token_id));
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t LabeledRecordBytes(const LabeledFileHeader& header) {
  return kRecordPrefixBytes + uint64_t{header.seq_len} * header.token_bytes;
}

absl::StatusOr<LabeledFileHeader> WriteLabeledFile(const std::string& path,
                                                   LabeledFileHeader header,
                                                   absl::Span<const LabeledExample> train,
                                                   absl::Span<const LabeledExample> validation) {
  if (header.seq_len == 0 || header.seq_len > kMaxLabeledSeqLen) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_len must be in [1, ", kMaxLabeledSeqLen, "], got ", header.seq_len));
  }
  if (absl::Status status = CheckLabelNames(header.label_names); !status.ok()) return status;
  if (header.padding_id >= header.tokenizer.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("padding id ", header.padding_id,
                                                   " is outside the vocabulary"));
  }
  header.token_bytes = TokenIdBytes(header.tokenizer.vocab_size);
  header.num_train = train.size();
  header.num_val = validation.size();
  header.max_token_id = 0;
  std::string payload;
  payload.reserve((train.size() + validation.size()) * LabeledRecordBytes(header));
  size_t index = 0;
  for (absl::Span<const LabeledExample> split : {train, validation}) {
    for (const LabeledExample& example : split) {
      if (absl::Status status = CheckExample(header, example, index++); !status.ok()) {
        return status;
      }
      header.max_token_id = std::max(
          {header.max_token_id, *std::max_element(example.ids.begin(), example.ids.end()),
           example.ids.size() < header.seq_len ? header.padding_id : 0u});
      AppendExample(header, example, &payload);
    }
  }
  const std::string fields = EncodeFields(header);
  header.payload_offset = FrameHeaderBytes(fields.size());
  if (absl::Status status =
          WriteFramedFile(path, kMagic, kLabeledFileVersion, fields, payload);
      !status.ok()) {
    return status;
  }
  return header;
}

absl::StatusOr<LabeledFileHeader> ParseLabeledFile(absl::Span<const uint8_t> file) {
  absl::StatusOr<Frame> frame = ParseFrame(file, kMagic, kLabeledFileVersion, kWhat);
  if (!frame.ok()) return frame.status();
  LabeledFileHeader header;
  header.payload_offset = frame->payload_offset;
  if (absl::Status status = TakeFields(frame->fields, &header); !status.ok()) return status;
  if (absl::Status status = CheckHeader(header); !status.ok()) return status;
  const uint64_t expected = (header.num_train + header.num_val) * LabeledRecordBytes(header);
  if (frame->payload.size() != expected) {
    return absl::DataLossError(absl::StrCat(
        "labeled-example file size mismatch: header promises ", header.num_train, " + ",
        header.num_val, " examples of ", LabeledRecordBytes(header), " bytes (", expected,
        "), payload has ", frame->payload.size()));
  }
  absl::Status records = header.token_bytes == 2 ? CheckRecords<2>(header, frame->payload)
                                                 : CheckRecords<4>(header, frame->payload);
  if (!records.ok()) return records;
  return header;
}

}  // namespace spotps
