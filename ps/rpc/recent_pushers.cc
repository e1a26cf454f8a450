#include "ps/rpc/recent_pushers.h"

#include <algorithm>
#include <iterator>

namespace spotps {

void RecentPushers::Record(absl::string_view client, absl::Time now) {
  if (client.empty()) return;
  absl::MutexLock lock(&mu_);
  auto it = last_push_.find(client);
  if (it != last_push_.end()) {
    it->second = std::max(it->second, now);
    return;
  }
  if (last_push_.size() >= max_clients_) {
    auto oldest = std::min_element(last_push_.begin(), last_push_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
    last_push_.erase(oldest);
  }
  last_push_.emplace(client, now);
}

int RecentPushers::Count(absl::Time now, absl::Duration window) {
  absl::MutexLock lock(&mu_);
  for (auto it = last_push_.begin(); it != last_push_.end();) {
    it = now - it->second > window ? last_push_.erase(it) : std::next(it);
  }
  return static_cast<int>(last_push_.size());
}

}  // namespace spotps
