#include "ps/coordination/work_unit_dispatcher.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "absl/strings/str_format.h"
#include "common/kernel_random.h"

namespace spotps {
namespace {

// Records before job ids ("SPWP") and since ("SPW2", the id follows).
constexpr uint32_t kProgressMagicNoJobId = 0x53505750;
constexpr uint32_t kProgressMagic = 0x53505732;

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
  d.job_id_ = KernelRandomU64();
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
  previous_lessees_.clear();
  if (epoch == epoch_ + 1) {
    for (Unit& u : units_) previous_lessees_.push_back(std::move(u.lessees));
  }
  epoch_ = epoch;
  committed_in_epoch_ = 0;
  units_.assign(epoch < config_.num_epochs ? config_.units_per_epoch : 0, Unit{});
  pending_.clear();
  for (uint64_t i = 0; i < units_.size(); ++i) pending_.push_back(i);
  order_ = epoch < config_.num_epochs ? EpochOrder(config_.seed, epoch, config_.units_per_epoch)
                                      : std::vector<uint64_t>{};
}

void WorkUnitDispatcher::ReturnToPending(uint64_t index) {
  Unit& u = units_[index];
  u.state = UnitState::kPending;
  u.worker = 0;
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
  Unit& u = units_[index];
  u.state = UnitState::kLeased;
  u.worker = worker;
  u.deadline = now + config_.unit_lease;
  if (std::find(u.lessees.begin(), u.lessees.end(), worker) == u.lessees.end()) {
    u.lessees.push_back(worker);
  }
  grant.outcome = Outcome::kUnit;
  grant.epoch = epoch_;
  grant.index = index;
  grant.data_unit = order_[index];
  grant.push_key = PushKey(epoch_, index);
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

const std::vector<uint64_t>* WorkUnitDispatcher::LesseesOf(uint32_t epoch, uint64_t index) const {
  if (epoch == epoch_ && index < units_.size()) return &units_[index].lessees;
  if (epoch + 1 == epoch_ && index < previous_lessees_.size()) return &previous_lessees_[index];
  return nullptr;
}

absl::Status WorkUnitDispatcher::CheckLessee(uint64_t worker, uint32_t epoch,
                                             uint64_t index) const {
  if (absl::Status s = ValidateUnit(epoch, index); !s.ok()) return s;
  const std::vector<uint64_t>* lessees = LesseesOf(epoch, index);
  if (lessees == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "commits for epoch %d are no longer taken: the current epoch is %d (late commits count "
        "for the previous epoch only, and none from before a restore of the data progress)",
        epoch, epoch_));
  }
  if (lessees->empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "unit %d of epoch %d was never leased since the data progress was restored: nothing "
        "to commit",
        index, epoch));
  }
  if (std::find(lessees->begin(), lessees->end(), worker) == lessees->end()) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "worker %d never held unit %d of epoch %d: only a worker it was leased to may commit or "
        "release it",
        worker, index, epoch));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> WorkUnitDispatcher::Commit(uint64_t worker, uint32_t epoch, uint64_t index) {
  if (absl::Status s = CheckLessee(worker, epoch, index); !s.ok()) return s;
  if (epoch < epoch_ || units_[index].state == UnitState::kCommitted) {
    counts_[epoch].duplicated += 1;
    return true;
  }
  if (units_[index].state == UnitState::kPending) {
    // Its lease expired and it waits to be re-issued: the late commit still
    // counts, so take it out of the queue.
    if (auto it = std::find(pending_.begin(), pending_.end(), index); it != pending_.end()) {
      pending_.erase(it);
    }
  }
  units_[index].state = UnitState::kCommitted;
  counts_[epoch].committed += 1;
  if (++committed_in_epoch_ == config_.units_per_epoch) StartEpoch(epoch_ + 1);
  return false;
}

absl::Status WorkUnitDispatcher::Release(uint64_t worker, uint32_t epoch, uint64_t index) {
  if (absl::Status s = CheckLessee(worker, epoch, index); !s.ok()) return s;
  if (epoch == epoch_ && units_[index].state == UnitState::kLeased &&
      units_[index].worker == worker) {
    ReturnToPending(index);
  }
  return absl::OkStatus();  // A lease that already ended: nothing to give back.
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

std::string WorkUnitDispatcher::PushKey(uint32_t epoch, uint64_t index) const {
  return absl::StrFormat("%016x.%d.%d", job_id_, epoch, index);
}

std::string WorkUnitDispatcher::ExportProgress() const {
  std::string out;
  Put(out, kProgressMagic);
  Put(out, job_id_);
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
  uint64_t job_id = job_id_, units = 0, seed = 0;
  if (!Get(bytes, pos, &magic) || (magic != kProgressMagic && magic != kProgressMagicNoJobId) ||
      (magic == kProgressMagic && !Get(bytes, pos, &job_id)) || !Get(bytes, pos, &epochs) ||
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
  job_id_ = job_id;
  counts_ = std::move(counts);
  StartEpoch(epoch);
  previous_lessees_.clear();  // No lease carries over a restore.
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
