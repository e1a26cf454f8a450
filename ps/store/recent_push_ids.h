// RecentPushIds: the ids of the most recent pushes a shard applied, so that a
// retried push is recognised and not applied twice.
#ifndef SPOTPS_PS_STORE_RECENT_PUSH_IDS_H_
#define SPOTPS_PS_STORE_RECENT_PUSH_IDS_H_

#include <cstddef>
#include <deque>
#include <string>
#include <vector>
#include <unordered_set>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace spotps {

// A push id has 1 to this many bytes (clients make ids of about 24).
inline constexpr size_t kMaxPushIdLength = 128;

// Owns a bounded set of ids, evicting the oldest first. Promises: an id
// inserted is reported as seen until `capacity` newer ids have been inserted;
// thread-safe.
class RecentPushIds {
 public:
  explicit RecentPushIds(size_t capacity) : capacity_(capacity) {}

  // Records `id`; returns false if it was already recorded.
  bool Insert(absl::string_view id);
  bool Contains(absl::string_view id) const;
  // The ids, oldest first: what a checkpoint keeps so that a push retried
  // across a restart is still recognised.
  std::vector<std::string> Snapshot() const;

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::unordered_set<std::string> ids_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_RECENT_PUSH_IDS_H_
