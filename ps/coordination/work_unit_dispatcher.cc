#include "ps/coordination/work_unit_dispatcher.h"

#include <cstring>
#include <random>

#include "absl/strings/str_format.h"

namespace spotps {
namespace {

constexpr uint32_t kProgressMagic = 0x53505750;  // "SPWP"

template <typename T>
void Put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

template <typename T>
bool Get(const std::string& in, size_t& pos, T* value) {
  if (pos + sizeof(T) > in.size()) return false;
  std::memcpy(value, in.data() + pos, sizeof(T));
  pos += sizeof(T);
  return true;
}

}  // namespace

absl::StatusOr<WorkUnitDispatcher> WorkUnitDispatcher::Create(const DispatchConfig& config) {
  if (config.num_epochs == 0 || config.units_per_epoch == 0 ||
      config.units_per_epoch > (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("need epochs >= 1 and 1 <= units_per_epoch <= 2^32, got %d and %d",
                        config.num_epochs, config.units_per_epoch));
  }
  if (config.unit_lease <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("unit lease must be positive");
  }
  WorkUnitDispatcher d(config);
  d.counts_.assign(config.num_epochs, EpochCounts{});
  d.StartEpoch(0);
  return d;
}

std::vector<uint64_t> WorkUnitDispatcher::EpochOrder(uint64_t seed, uint32_t epoch,
                                                     uint64_t units) {
  std::vector<uint64_t> order(units);
  for (uint64_t i = 0; i < units; ++i) order[i] = i;
  // Fisher-Yates with our own index draw: std::shuffle's algorithm is not
  // specified, and every build must agree on the order.
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + epoch);
  for (uint64_t i = units; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  return order;
}

void WorkUnitDispatcher::StartEpoch(uint32_t epoch) {
  epoch_ = epoch;
  committed_in_epoch_ = 0;
  units_.assign(epoch < config_.num_epochs ? config_.units_per_epoch : 0, Unit{});
  pending_.clear();
  for (uint64_t i = 0; i < units_.size(); ++i) pending_.push_back(i);
  order_ = epoch < config_.num_epochs ? EpochOrder(config_.seed, epoch, config_.units_per_epoch)
                                      : std::vector<uint64_t>{};
}

void WorkUnitDispatcher::ReturnToPending(uint64_t index) {
  const bool leased_since_import = units_[index].leased_since_import;
  units_[index] = Unit{};
  units_[index].leased_since_import = leased_since_import;
  pending_.push_front(index);  // Re-issued units go first.
  counts_[epoch_].reissued += 1;
}

WorkUnitDispatcher::Grant WorkUnitDispatcher::Acquire(uint64_t worker, absl::Time now) {
  ExpireLeases(now);
  Grant grant;
  if (done()) {
    grant.outcome = Outcome::kDone;
    return grant;
  }
  if (pending_.empty()) return grant;  // kWait: the rest is leased.
  const uint64_t index = pending_.front();
  pending_.pop_front();
  units_[index] = Unit{UnitState::kLeased, worker, now + config_.unit_lease, true};
  grant.outcome = Outcome::kUnit;
  grant.epoch = epoch_;
  grant.index = index;
  grant.data_unit = order_[index];
  return grant;
}

absl::Status WorkUnitDispatcher::ValidateUnit(uint32_t epoch, uint64_t index) const {
  if (epoch >= config_.num_epochs || index >= config_.units_per_epoch) {
    return absl::InvalidArgumentError(
        absl::StrFormat("no unit %d of epoch %d (the job has %d epochs of %d units)", index, epoch,
                        config_.num_epochs, config_.units_per_epoch));
  }
  if (epoch > epoch_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("epoch %d has not started (current epoch %d)", epoch, epoch_));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> WorkUnitDispatcher::Commit(uint32_t epoch, uint64_t index) {
  if (absl::Status s = ValidateUnit(epoch, index); !s.ok()) return s;
  if (epoch < epoch_ || units_[index].state == UnitState::kCommitted) {
    counts_[epoch].duplicated += 1;
    return true;
  }
  if (units_[index].state == UnitState::kPending) {
    if (!units_[index].leased_since_import) {  // From before a rollback.
      counts_[epoch].duplicated += 1;
      return true;
    }
    // Its lease expired and it waits to be re-issued: the late commit still
    // counts, so take it out of the queue.
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (*it == index) {
        pending_.erase(it);
        break;
      }
    }
  }
  units_[index].state = UnitState::kCommitted;
  counts_[epoch].committed += 1;
  if (++committed_in_epoch_ == config_.units_per_epoch) StartEpoch(epoch_ + 1);
  return false;
}

absl::Status WorkUnitDispatcher::Release(uint64_t worker, uint32_t epoch, uint64_t index) {
  if (epoch != epoch_ || index >= units_.size()) return absl::OkStatus();  // Nothing held.
  if (units_[index].state == UnitState::kLeased && units_[index].worker == worker) {
    ReturnToPending(index);
  }
  return absl::OkStatus();
}

void WorkUnitDispatcher::ReleaseWorker(uint64_t worker) {
  for (uint64_t i = 0; i < units_.size(); ++i) {
    if (units_[i].state == UnitState::kLeased && units_[i].worker == worker) ReturnToPending(i);
  }
}

void WorkUnitDispatcher::ExpireLeases(absl::Time now) {
  for (uint64_t i = 0; i < units_.size(); ++i) {
    if (units_[i].state == UnitState::kLeased && units_[i].deadline < now) ReturnToPending(i);
  }
}

uint64_t WorkUnitDispatcher::leased_now() const {
  uint64_t n = 0;
  for (const Unit& u : units_) n += u.state == UnitState::kLeased;
  return n;
}

std::string WorkUnitDispatcher::ExportProgress() const {
  std::string out;
  Put(out, kProgressMagic);
  Put(out, config_.num_epochs);
  Put(out, config_.units_per_epoch);
  Put(out, config_.seed);
  Put(out, epoch_);
  for (const EpochCounts& c : counts_) {
    Put(out, c.committed);
    Put(out, c.reissued);
    Put(out, c.duplicated);
  }
  for (const Unit& u : units_) out.push_back(u.state == UnitState::kCommitted ? 1 : 0);
  return out;
}

absl::Status WorkUnitDispatcher::ImportProgress(const std::string& bytes) {
  size_t pos = 0;
  uint32_t magic = 0, epochs = 0, epoch = 0;
  uint64_t units = 0, seed = 0;
  if (!Get(bytes, pos, &magic) || magic != kProgressMagic || !Get(bytes, pos, &epochs) ||
      !Get(bytes, pos, &units) || !Get(bytes, pos, &seed) || !Get(bytes, pos, &epoch)) {
    return absl::DataLossError("data progress record is truncated or not one");
  }
  if (epochs != config_.num_epochs || units != config_.units_per_epoch || seed != config_.seed) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "data progress is for %d epochs of %d units with seed %d, this job has %d of %d, seed %d",
        epochs, units, seed, config_.num_epochs, config_.units_per_epoch, config_.seed));
  }
  std::vector<EpochCounts> counts(epochs);
  for (EpochCounts& c : counts) {
    if (!Get(bytes, pos, &c.committed) || !Get(bytes, pos, &c.reissued) ||
        !Get(bytes, pos, &c.duplicated)) {
      return absl::DataLossError("data progress counts are truncated");
    }
  }
  const uint64_t expected_units = epoch < epochs ? units : 0;
  if (epoch > epochs || bytes.size() - pos != expected_units) {
    return absl::DataLossError("data progress unit states are truncated");
  }
  counts_ = std::move(counts);
  StartEpoch(epoch);
  pending_.clear();
  for (uint64_t i = 0; i < units_.size(); ++i) {
    if (bytes[pos + i] == 1) {
      units_[i].state = UnitState::kCommitted;
      committed_in_epoch_ += 1;
    } else {
      pending_.push_back(i);
    }
  }
  return absl::OkStatus();
}

}  // namespace spotps
