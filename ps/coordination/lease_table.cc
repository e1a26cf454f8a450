#include "ps/coordination/lease_table.h"

#include <algorithm>

namespace spotps {

uint64_t LeaseTable::Register(const std::string& name, uint64_t tokens_per_unit,
                              absl::Time now) {
  const uint64_t id = next_id_++;
  // A newcomer starts at the slowest clock, so it neither blocks the others
  // nor gets to run ahead of them.
  members_[id] = Member{id, name, now, 0, MinClock(), 0, tokens_per_unit};
  return id;
}

uint64_t LeaseTable::MinClock() const {
  if (members_.empty()) return 0;
  uint64_t min = ~uint64_t{0};
  for (const auto& [id, m] : members_) min = std::min(min, m.clock);
  return min;
}

LeaseTable::Member* LeaseTable::Find(uint64_t id) {
  auto it = members_.find(id);
  return it == members_.end() ? nullptr : &it->second;
}

bool LeaseTable::Renew(uint64_t id, absl::Time now) {
  auto it = members_.find(id);
  if (it == members_.end() || Expired(it->second, now)) return false;
  it->second.last_heartbeat = now;
  it->second.cut_to = absl::InfiniteFuture();
  return true;
}

bool LeaseTable::Cut(uint64_t id, absl::Time end) {
  Member* m = Find(id);
  if (m == nullptr) return false;
  m->cut_to = std::min(m->cut_to, end);
  return true;
}

bool LeaseTable::Remove(uint64_t id) { return members_.erase(id) != 0; }

std::vector<uint64_t> LeaseTable::Expire(absl::Time now) {
  std::vector<uint64_t> expired;
  for (auto it = members_.begin(); it != members_.end();) {
    if (Expired(it->second, now)) {
      expired.push_back(it->first);
      it = members_.erase(it);
    } else {
      ++it;
    }
  }
  expired_total_ += expired.size();
  return expired;
}

void LeaseTable::CountCommit(uint64_t id) {
  auto it = members_.find(id);
  if (it != members_.end()) it->second.units_committed += 1;
}

}  // namespace spotps
