// The spotps-sentencepiece helper process (sentencepiece_server_main.cc),
// through which spotps trains and runs SentencePiece models: one per
// process, started on first use, ended when the process ends.

#ifndef SPOTPS_TRAINER_DATA_SENTENCEPIECE_HELPER_H_
#define SPOTPS_TRAINER_DATA_SENTENCEPIECE_HELPER_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "trainer/data/sentencepiece_protocol.h"

namespace spotps {

// Where the helper program is looked for: $SPOTPS_SENTENCEPIECE_HELPER if
// set, else beside the running executable (as built and as installed).
inline constexpr char kSentencePieceHelperName[] = "spotps-sentencepiece";

// One request at a time, from any thread. Errors the library reports are
// InvalidArgument; a helper that cannot start or has died is
// FailedPrecondition or Internal, saying so.
class SentencePieceHelper {
 public:
  // The process's helper, started on the first call.
  static absl::StatusOr<SentencePieceHelper*> Get();

  // Trains a model of `vocab_size` pieces ("bpe" or "unigram") on
  // `sentences` and returns it serialized.
  absl::StatusOr<std::string> Train(absl::Span<const absl::string_view> sentences,
                                    int vocab_size, absl::string_view model_type);

  struct LoadedModel {
    uint32_t handle = 0;
    int vocab_size = 0;
    int pad_id = -1;
    int eos_id = -1;
    int unk_id = 0;
  };
  absl::StatusOr<LoadedModel> Load(absl::string_view serialized_model);
  // Appends the ids of `text`, encoded line by line.
  absl::Status Encode(uint32_t handle, absl::string_view text, std::vector<uint32_t>& ids);
  // `ids` must all be below the model's vocab_size.
  absl::StatusOr<std::string> Decode(uint32_t handle, absl::Span<const int64_t> ids);
  void Release(uint32_t handle);

 private:
  SentencePieceHelper(int socket, pid_t pid) : socket_(socket), pid_(pid) {}
  static absl::StatusOr<SentencePieceHelper*> Start();

  // Sends one request and returns the reply's payload.
  absl::StatusOr<std::string> Call(sentencepiece_protocol::MessageType type,
                                   absl::string_view payload);
  absl::Status HelperGone() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  absl::Mutex mutex_;
  const int socket_;
  const pid_t pid_;
  bool gone_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_SENTENCEPIECE_HELPER_H_
