#include "ps/store/recent_push_ids.h"

namespace spotps {

bool RecentPushIds::Insert(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  if (!ids_.emplace(id).second) return false;
  order_.emplace_back(id);
  if (order_.size() > capacity_) {
    ids_.erase(order_.front());
    order_.pop_front();
  }
  return true;
}

std::vector<std::string> RecentPushIds::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return std::vector<std::string>(order_.begin(), order_.end());
}

bool RecentPushIds::Contains(absl::string_view id) const {
  absl::MutexLock lock(&mu_);
  return ids_.count(std::string(id)) != 0;
}

}  // namespace spotps
