#include "ps/rpc/recent_pushers.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

namespace spotps {

bool RecentPushers::Forget(absl::string_view client) {
  absl::MutexLock lock(&mu_);
  auto it = clients_.find(client);
  if (it == clients_.end()) return false;
  clients_.erase(it);
  return true;
}

bool RecentPushers::Announce(absl::string_view client, absl::Time now) {
  if (client.empty()) return false;
  absl::MutexLock lock(&mu_);
  if (clients_.find(client) != clients_.end()) return false;
  Client c{now};
  c.announced_only = true;
  Add(client, c);
  return true;
}

void RecentPushers::Record(absl::string_view client, absl::Time now) {
  if (client.empty()) return;
  absl::MutexLock lock(&mu_);
  auto it = clients_.find(client);
  if (it == clients_.end()) {
    Add(client, Client{now});
    return;
  }
  Client& c = it->second;
  if (c.announced_only) {
    // Its first push landed: intervals count from here.
    c = Client{std::max(c.last, now)};
    return;
  }
  const absl::Duration interval = std::max(now - c.last, absl::ZeroDuration());
  // An exponential mean over ~4 pushes: follows a step time that changes.
  c.mean_interval = c.mean_interval == absl::InfiniteDuration()
                        ? interval
                        : c.mean_interval + (interval - c.mean_interval) / 4;
  c.last = std::max(c.last, now);
}

void RecentPushers::Add(absl::string_view client, Client c) {
  if (clients_.size() >= options_.max_clients) {
    auto oldest = std::min_element(clients_.begin(), clients_.end(), [](const auto& a, const auto& b) {
      return a.second.last < b.second.last;
    });
    clients_.erase(oldest);
  }
  clients_.emplace(client, c);
}

void RecentPushers::Attend(absl::string_view client) {
  if (client.empty()) return;
  absl::MutexLock lock(&mu_);
  auto it = attending_.find(client);
  if (it == attending_.end()) it = attending_.emplace(std::string(client), 0).first;
  ++it->second;
}

void RecentPushers::Depart(absl::string_view client) {
  absl::MutexLock lock(&mu_);
  auto it = attending_.find(client);
  if (it != attending_.end() && --it->second == 0) attending_.erase(it);
}

bool RecentPushers::KeptByAttendance(const std::string& name, const Client& c) const {
  return options_.attendance_keeps_live && c.mean_interval == absl::InfiniteDuration() &&
         attending_.find(name) != attending_.end();
}

absl::Duration RecentPushers::Silence(const Client& c) const {
  if (c.mean_interval == absl::InfiniteDuration()) return options_.unknown_silence;
  return std::max(options_.min_silence, 3 * c.mean_interval);
}

int RecentPushers::Count(absl::Time now) {
  absl::MutexLock lock(&mu_);
  for (auto it = clients_.begin(); it != clients_.end();) {
    const bool silent = now - it->second.last > Silence(it->second);
    it = silent && !KeptByAttendance(it->first, it->second) ? clients_.erase(it) : std::next(it);
  }
  return static_cast<int>(clients_.size());
}

absl::Duration RecentPushers::MedianInterval() {
  std::vector<absl::Duration> intervals;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, c] : clients_) {
    if (c.mean_interval != absl::InfiniteDuration()) intervals.push_back(c.mean_interval);
  }
  if (intervals.empty()) return absl::ZeroDuration();
  auto middle = intervals.begin() + intervals.size() / 2;
  std::nth_element(intervals.begin(), middle, intervals.end());
  return *middle;
}

}  // namespace spotps
