// JoinTimeline: where a trainer's time goes between the moment the kernel
// started its process and its first applied push (the "join" of a spot
// worker), phase by phase, for the `join:` line and first_push_s.
#ifndef SPOTPS_TRAINER_ELASTIC_JOIN_TIMELINE_H_
#define SPOTPS_TRAINER_ELASTIC_JOIN_TIMELINE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace spotps {

// When the kernel created this process (fork, for a process started by
// fork + exec: the exec follows at once), so that the dynamic loader and
// LibTorch's static initialisers (0.5-1.5 s here) count as start-up too.
// Read from /proc/self/stat (10 ms resolution); now when unreadable.
absl::Time ProcessStartTime();

// Owns an ordered list of phase ends. Thread-compatible.
class JoinTimeline {
 public:
  // The clock starts at ProcessStartTime(); the time until this constructor
  // runs (loader and static initialisers) is the first phase, "exec".
  JoinTimeline();
  explicit JoinTimeline(absl::Time process_start);

  // `phase` ended now (its duration: since the previous mark).
  void Mark(absl::string_view phase);
  // A phase measured elsewhere (e.g. inside the training loop).
  void Add(absl::string_view phase, absl::Duration duration);

  absl::Time process_start() const { return process_start_; }
  // "join: exec_s=0.61 runtime_s=0.02 ... <phase>_s=..." in mark order.
  std::string Line() const;

 private:
  absl::Time process_start_;
  absl::Time last_mark_;
  std::vector<std::pair<std::string, absl::Duration>> phases_;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_ELASTIC_JOIN_TIMELINE_H_
