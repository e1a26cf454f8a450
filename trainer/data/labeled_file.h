// On-disk format of labeled examples for fine-tuning a classifier:
// tokenized, truncated or padded to one length, with dense label ids and a
// stratified validation split. Written by spotps-tokenize --labeled, read
// by LabeledDataset.
//
// A framed file (framed_file.h) with magic "SPLABELS", version 1, and these
// header fields, little-endian:
//   tokenizer      see PutTokenizerIdentity
//   token_bytes    uint32: 2 (uint16 ids) when vocab_size <= 65536, else 4
//   max_token_id   uint32: the largest id in any example (padding included)
//   seq_len        uint32: tokens per example
//   padding_id     uint32: the id after an example's last token
//   num_classes    uint32, then each label name (uint32 length, bytes) in
//                  id order, which is the names' byte order
//   num_train      uint64
//   num_val        uint64
// The payload is the train examples, then the validation examples, each
// (label uint32, length uint32, seq_len ids): the first `length` (1 to
// seq_len) ids are the text's, the rest padding_id. The attention mask is
// 1 for the first `length` positions, 0 after.

#ifndef SPOTPS_TRAINER_DATA_LABELED_FILE_H_
#define SPOTPS_TRAINER_DATA_LABELED_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trainer/data/tokenizer_identity.h"

namespace spotps {

inline constexpr uint32_t kLabeledFileVersion = 1;
inline constexpr uint32_t kMaxLabeledClasses = 1 << 16;
inline constexpr uint32_t kMaxLabeledSeqLen = 1 << 20;

struct LabeledFileHeader {
  TokenizerIdentity tokenizer;
  uint32_t token_bytes = 2;
  uint32_t max_token_id = 0;
  uint32_t seq_len = 0;
  uint32_t padding_id = 0;
  std::vector<std::string> label_names;  // By label id.
  uint64_t num_train = 0;
  uint64_t num_val = 0;
  uint64_t payload_offset = 0;
};

// One example before padding: 1 to seq_len ids.
struct LabeledExample {
  uint32_t label = 0;
  std::vector<uint32_t> ids;
};

// Bytes of one example in the payload.
uint64_t LabeledRecordBytes(const LabeledFileHeader& header);

// Writes `train` then `validation` to `path` atomically (write, fsync,
// rename). `header` gives tokenizer, seq_len, padding_id and label_names;
// the counts, widths and largest id are filled in from the examples, and
// the header written is returned. InvalidArgument for an example with no
// ids or more than seq_len, a label or id out of range, or label names
// that are not distinct and sorted.
absl::StatusOr<LabeledFileHeader> WriteLabeledFile(const std::string& path,
                                                   LabeledFileHeader header,
                                                   absl::Span<const LabeledExample> train,
                                                   absl::Span<const LabeledExample> validation);

// Decodes and checks the whole image `file`: InvalidArgument if it is not
// a labeled-example file or has another version; DataLoss saying what is
// wrong for a truncated or corrupt file or any example breaking the rules
// above (label, length, ids, padding).
absl::StatusOr<LabeledFileHeader> ParseLabeledFile(absl::Span<const uint8_t> file);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_LABELED_FILE_H_
