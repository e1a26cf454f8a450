#include "ps/coordinator.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace spotps {

absl::StatusOr<int64_t> ParseConsistency(absl::string_view mode) {
  if (mode == "async") return -1;
  int64_t bound = -1;
  if (absl::ConsumePrefix(&mode, "ssp:") && absl::SimpleAtoi(mode, &bound) && bound >= 0) {
    return bound;
  }
  if (mode == "sync") {
    return absl::UnimplementedError("--consistency=sync is not built yet; use async or ssp:S");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--consistency must be async or ssp:S with S >= 0, got '", mode, "'"));
}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(const CoordinatorOptions& options,
                                                                 Clock clock) {
  if (options.worker_lease <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("worker lease must be positive");
  }
  absl::StatusOr<WorkUnitDispatcher> dispatcher = WorkUnitDispatcher::Create(options.dispatch);
  if (!dispatcher.ok()) return dispatcher.status();
  return std::unique_ptr<Coordinator>(
      new Coordinator(options, *std::move(dispatcher), std::move(clock)));
}

Coordinator::Coordinator(const CoordinatorOptions& options, WorkUnitDispatcher dispatcher,
                         Clock clock)
    : options_(options),
      clock_(std::move(clock)),
      leases_(options.worker_lease),
      dispatcher_(std::move(dispatcher)) {}

void Coordinator::ExpireWorkers(absl::Time now) {
  for (uint64_t worker : leases_.Expire(now)) dispatcher_.ReleaseWorker(worker);
}

uint64_t Coordinator::Register(const std::string& name) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_();
  ExpireWorkers(now);
  return leases_.Register(name, now);
}

absl::Status Coordinator::Heartbeat(uint64_t worker) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_();
  ExpireWorkers(now);
  if (leases_.Renew(worker, now)) return absl::OkStatus();
  return absl::NotFoundError(absl::StrFormat(
      "worker %d is not registered or its lease expired: register again", worker));
}

void Coordinator::Deregister(uint64_t worker) {
  absl::MutexLock lock(&mu_);
  leases_.Remove(worker);
  dispatcher_.ReleaseWorker(worker);
}

absl::StatusOr<WorkUnitDispatcher::Grant> Coordinator::Acquire(uint64_t worker) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_();
  ExpireWorkers(now);
  LeaseTable::Member* member = leases_.Find(worker);
  if (member == nullptr) {
    return absl::NotFoundError(absl::StrFormat(
        "worker %d is not registered or its lease expired: register again", worker));
  }
  if (options_.ssp_bound >= 0 &&
      member->clock > leases_.MinClock() + static_cast<uint64_t>(options_.ssp_bound)) {
    return WorkUnitDispatcher::Grant{};  // kWait: let the slowest catch up.
  }
  WorkUnitDispatcher::Grant grant = dispatcher_.Acquire(worker, now);
  if (grant.outcome == WorkUnitDispatcher::Outcome::kUnit) member->clock += 1;
  return grant;
}

absl::StatusOr<bool> Coordinator::Commit(uint64_t worker, uint32_t epoch, uint64_t index) {
  absl::MutexLock lock(&mu_);
  ExpireWorkers(clock_());
  absl::StatusOr<bool> duplicate = dispatcher_.Commit(epoch, index);
  if (duplicate.ok() && !*duplicate) leases_.CountCommit(worker);
  return duplicate;
}

void Coordinator::Release(uint64_t worker, uint32_t epoch, uint64_t index) {
  absl::MutexLock lock(&mu_);
  dispatcher_.Release(worker, epoch, index).IgnoreError();
}

v1::ProgressResponse Coordinator::Progress() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_();
  ExpireWorkers(now);
  v1::ProgressResponse p;
  const DispatchConfig& config = dispatcher_.config();
  p.set_current_epoch(dispatcher_.epoch());
  p.set_num_epochs(config.num_epochs);
  p.set_done(dispatcher_.done());
  for (uint32_t e = 0; e < config.num_epochs; ++e) {
    const EpochCounts& c = dispatcher_.counts()[e];
    v1::EpochProgress* ep = p.add_epochs();
    ep->set_epoch(e);
    ep->set_units(config.units_per_epoch);
    ep->set_committed(c.committed);
    ep->set_leased(e == dispatcher_.epoch() ? dispatcher_.leased_now() : 0);
    ep->set_reissued(c.reissued);
    ep->set_duplicated(c.duplicated);
  }
  for (const auto& [id, m] : leases_.members()) {
    v1::WorkerStatus* w = p.add_workers();
    w->set_worker_id(id);
    w->set_name(m.name);
    w->set_units_committed(m.units_committed);
    w->set_ms_since_heartbeat(absl::ToInt64Milliseconds(now - m.last_heartbeat));
    w->set_clock(m.clock);
  }
  p.set_workers_expired(leases_.expired_total());
  return p;
}

std::string Coordinator::ExportProgress() {
  absl::MutexLock lock(&mu_);
  return dispatcher_.ExportProgress();
}

absl::Status Coordinator::ImportProgress(const std::string& bytes) {
  absl::MutexLock lock(&mu_);
  return dispatcher_.ImportProgress(bytes);
}

}  // namespace spotps
