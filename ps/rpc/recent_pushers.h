// RecentPushers: the clients that push to a shard and still look alive, so
// that a shard can count the live workers that size "avg"'s k and
// "warmup"'s length without asking the coordinator.
#ifndef SPOTPS_PS_RPC_RECENT_PUSHERS_H_
#define SPOTPS_PS_RPC_RECENT_PUSHERS_H_

#include <cstddef>
#include <functional>
#include <map>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace spotps {

// Owns each named client's last push time and its mean interval between
// pushes. A client counts as live from its first push, or from an
// announcement before it (a trainer's Join), until it has been silent for
// three of its intervals (at least `min_silence`), or for `unknown_silence`
// while it has pushed at most once; with `attendance_keeps_live`, such a
// client (its pace not known yet) that holds a presence stream stays live
// however long it is silent.
// Promises: at most `max_clients` names are kept (the longest silent one
// makes room), so a client inventing names costs bounded memory; attending
// alone never counts a client. Thread-safe.
class RecentPushers {
 public:
  struct Options {
    size_t max_clients = 4096;
    absl::Duration min_silence = absl::Seconds(1);
    absl::Duration unknown_silence = absl::Seconds(10);
    // Local mode: a first round of H steps can take far longer than
    // `unknown_silence`, and a trainer dropped then is re-added without its
    // pace at its next push, to be dropped again. A trainer that is killed
    // breaks its presence stream at once (ParameterServerService::Attend),
    // so an open stream is the better witness until its second push; after
    // it the pace judges, so that a hung trainer with its connection open
    // still drops out. Off elsewhere: a trainer in a long eval should not
    // hold every "fresh" update for its wait.
    bool attendance_keeps_live = false;
  };
  RecentPushers() : RecentPushers(Options()) {}
  explicit RecentPushers(const Options& options) : options_(options) {}

  // Counts `client` before its first push lands (ParameterServer/Join);
  // true if it was not counted yet. An empty name is not counted.
  bool Announce(absl::string_view client, absl::Time now);
  // Records a push by `client` (PushRequest.worker_id) at `now`; an empty
  // name is not counted.
  void Record(absl::string_view client, absl::Time now);
  // Stops counting `client` (it said it pushes no more); false if it was
  // not counted.
  bool Forget(absl::string_view client);
  // `client` opened a presence stream (Attend) / its stream ended (Depart).
  // A client may hold more than one while it reopens one.
  void Attend(absl::string_view client);
  void Depart(absl::string_view client);
  // The clients live at `now`; forgets the others.
  int Count(absl::Time now);
  // The median of the kept clients' mean intervals between pushes (in
  // local mode, their round time), over those that have pushed twice;
  // zero while none has.
  absl::Duration MedianInterval();

 private:
  struct Client {
    absl::Time last;
    absl::Duration mean_interval = absl::InfiniteDuration();  // Until a second push.
    bool announced_only = false;                              // No push of it has landed yet.
  };
  absl::Duration Silence(const Client& c) const;
  // Whether `c`, silent past its bound, still counts by its presence stream.
  bool KeptByAttendance(const std::string& name, const Client& c) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds `client`, making room if need be.
  void Add(absl::string_view client, Client c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  absl::Mutex mu_;
  std::map<std::string, Client, std::less<>> clients_ ABSL_GUARDED_BY(mu_);
  // Open presence streams per client; bounded by PresenceStreams::kMaxStreams.
  std::map<std::string, int, std::less<>> attending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_RECENT_PUSHERS_H_
