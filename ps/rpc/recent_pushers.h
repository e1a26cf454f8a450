// RecentPushers: the clients that pushed to a shard lately, so that a shard
// without the coordinator (every shard but 0) can count the live workers
// that size "avg"'s k and "warmup"'s length.
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

// Owns the time of each named client's last push. Promises: at most
// `max_clients` names are kept (the longest silent one makes room), so a
// client inventing names costs bounded memory. Thread-safe.
class RecentPushers {
 public:
  explicit RecentPushers(size_t max_clients = 4096) : max_clients_(max_clients) {}

  // Records a push by `client` (PushRequest.worker_id) at `now`; an empty
  // name is not counted.
  void Record(absl::string_view client, absl::Time now);
  // The clients that pushed within `window` before `now`; forgets the
  // others.
  int Count(absl::Time now, absl::Duration window);

 private:
  const size_t max_clients_;
  absl::Mutex mu_;
  std::map<std::string, absl::Time, std::less<>> last_push_ ABSL_GUARDED_BY(mu_);
};

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_RECENT_PUSHERS_H_
