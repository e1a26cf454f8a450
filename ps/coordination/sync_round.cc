#include "ps/coordination/sync_round.h"

#include "absl/strings/str_format.h"

namespace spotps {

std::vector<SyncRound::Contribution> SyncRound::contributions() const {
  std::vector<Contribution> out;
  for (const auto& [worker, c] : contributed_) out.push_back(c);
  return out;
}

const WorkUnitDispatcher::Grant* SyncRound::Held(uint64_t worker) const {
  auto it = held_.find(worker);
  return it == held_.end() ? nullptr : &it->second;
}

void SyncRound::Hold(uint64_t worker, const WorkUnitDispatcher::Grant& grant) {
  held_[worker] = grant;
}

absl::Status SyncRound::Contribute(uint64_t worker, uint32_t epoch, uint64_t index,
                                   const std::string& push_id) {
  if (auto it = contributed_.find(worker); it != contributed_.end()) {
    if (it->second.epoch == epoch && it->second.index == index) return absl::OkStatus();
  }
  const WorkUnitDispatcher::Grant* held = Held(worker);
  if (closed_ || held == nullptr || held->epoch != epoch || held->index != index) {
    return absl::AbortedError(absl::StrFormat(
        "worker %d holds no unit %d of epoch %d in sync round %d: the round went on without "
        "this gradient, and the unit will be trained again",
        worker, index, epoch, number_));
  }
  contributed_[worker] = Contribution{worker, epoch, index, push_id};
  held_.erase(worker);
  return absl::OkStatus();
}

std::optional<WorkUnitDispatcher::Grant> SyncRound::Drop(uint64_t worker) {
  auto it = held_.find(worker);
  if (it == held_.end()) return std::nullopt;
  WorkUnitDispatcher::Grant grant = it->second;
  held_.erase(it);
  return grant;
}

bool SyncRound::CloseIfComplete(const std::vector<uint64_t>& live_workers, bool units_left) {
  if (closed_ || contributed_.empty()) return closed_;
  for (uint64_t w : live_workers) {
    const bool owes = !Contributed(w) && (Held(w) != nullptr || units_left);
    if (owes) return false;
  }
  closed_ = true;
  return true;
}

std::vector<SyncRound::Contribution> SyncRound::Advance() {
  std::vector<Contribution> ended = contributions();
  number_ += 1;
  closed_ = false;
  held_.clear();
  contributed_.clear();
  return ended;
}

}  // namespace spotps
