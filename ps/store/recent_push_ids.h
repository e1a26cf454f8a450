// RecentPushIds: the ids of the most recent pushes a shard applied, so that a
// retried push is recognised and not applied twice.
#ifndef SPOTPS_PS_STORE_RECENT_PUSH_IDS_H_
#define SPOTPS_PS_STORE_RECENT_PUSH_IDS_H_

#include <cstddef>
#include <deque>
#include <string>
#include <unordered_set>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace spotps {

// Owns a bounded set of ids, evicting the oldest first. Promises: an id
// inserted is reported as seen until `capacity` newer ids have been inserted;
// thread-safe.
class RecentPushIds {
 public:
  explicit RecentPushIds(size_t capacity) : capacity_(capacity) {}

  // Records `id`; returns false if it was already recorded.
  bool Insert(absl::string_view id);
  bool Contains(absl::string_view id) const;

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::unordered_set<std::string> ids_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_RECENT_PUSH_IDS_H_
