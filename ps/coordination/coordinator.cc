#include "ps/coordination/coordinator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ps/store/recent_push_ids.h"

namespace spotps {

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(const CoordinatorOptions& options,
                                                                 Clock clock) {
  if (options.worker_lease <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("worker lease must be positive");
  }
  CoordinatorOptions effective = options;
  // A sync round waits for every live worker, so a unit stays with its
  // worker for as long as the worker lives: re-issuing it to someone else
  // would train it twice in one round.
  // Local mode likewise: a unit's gradient lands only at the end of its
  // worker's round, H units later.
  if (options.consistency.mode == v1::CONSISTENCY_SYNC ||
      options.consistency.mode == v1::CONSISTENCY_LOCAL) {
    effective.dispatch.unit_lease = absl::InfiniteDuration();
  }
  absl::StatusOr<WorkUnitDispatcher> dispatcher = WorkUnitDispatcher::Create(effective.dispatch);
  if (!dispatcher.ok()) return dispatcher.status();
  return std::unique_ptr<Coordinator>(
      new Coordinator(effective, *std::move(dispatcher), std::move(clock)));
}

Coordinator::Coordinator(const CoordinatorOptions& options, WorkUnitDispatcher dispatcher,
                         Clock clock)
    : options_(options),
      clock_(std::move(clock)),
      leases_(options.worker_lease),
      dispatcher_(std::move(dispatcher)),
      started_(options.min_workers <= 1) {}

size_t Coordinator::WorkersToStart() const {
  const size_t live = leases_.members().size();
  return live >= options_.min_workers ? 0 : options_.min_workers - live;
}

bool Coordinator::AwaitStart() {
  if (!started_) {
    mu_.AwaitWithTimeout(absl::Condition(&started_), options_.sync_acquire_wait);
  }
  return started_;
}

absl::Status Coordinator::NotRegistered(uint64_t worker) const {
  return absl::NotFoundError(
      absl::StrFormat("worker %d is not registered or its lease expired: register again", worker));
}

void Coordinator::ReleaseUnitsOf(uint64_t worker) {
  if (!sync()) {
    dispatcher_.ReleaseWorker(worker);
    return;
  }
  // Only the unit it still trains goes back: a unit whose gradient already
  // landed stays in the round and is committed when the round applies.
  if (std::optional<WorkUnitDispatcher::Grant> held = round_.Drop(worker)) {
    dispatcher_.Release(worker, held->epoch, held->index).IgnoreError();
  }
}

void Coordinator::CloseRoundIfComplete() {
  if (!sync()) return;
  std::vector<uint64_t> live;
  for (const auto& [id, member] : leases_.members()) live.push_back(id);
  round_.CloseIfComplete(live, dispatcher_.has_pending());
}

void Coordinator::ExpireWorkers(absl::Time now) {
  for (uint64_t worker : leases_.Expire(now)) ReleaseUnitsOf(worker);
  CloseRoundIfComplete();
}

absl::StatusOr<uint64_t> Coordinator::Register(const std::string& name, uint64_t tokens_per_unit) {
  if (tokens_per_unit > kMaxTokensPerUnit) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokens_per_unit %d is more than the %d a unit may hold", tokens_per_unit,
        kMaxTokensPerUnit));
  }
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_();
  ExpireWorkers(now);
  if (leases_.members().size() >= options_.max_workers) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%d workers are registered, the most this coordinator takes: try again later",
        leases_.members().size()));
  }
  const uint64_t id = leases_.Register(name, tokens_per_unit, now);
  started_ = started_ || WorkersToStart() == 0;
  return id;
}

absl::Status Coordinator::Heartbeat(uint64_t worker) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_();
  ExpireWorkers(now);
  if (leases_.Renew(worker, now)) return absl::OkStatus();
  return NotRegistered(worker);
}

absl::Status Coordinator::OpenPresence(uint64_t worker) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_();
  ExpireWorkers(now);
  if (!leases_.Renew(worker, now)) return NotRegistered(worker);
  leases_.Find(worker)->presence_streams += 1;
  return absl::OkStatus();
}

void Coordinator::ClosePresence(uint64_t worker, bool broken) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_();
  ExpireWorkers(now);
  LeaseTable::Member* member = leases_.Find(worker);
  if (member == nullptr) return;  // Left, expired, or opened no stream.
  member->presence_streams = std::max(member->presence_streams - 1, 0);
  if (broken && member->presence_streams == 0 && options_.presence_grace > absl::ZeroDuration()) {
    leases_.Cut(worker, now + options_.presence_grace);
  }
}

absl::Status Coordinator::Deregister(uint64_t worker) {
  absl::MutexLock lock(&mu_);
  ExpireWorkers(clock_());
  if (!leases_.Remove(worker)) return NotRegistered(worker);
  ReleaseUnitsOf(worker);
  CloseRoundIfComplete();
  return absl::OkStatus();
}

absl::StatusOr<WorkUnitDispatcher::Grant> Coordinator::Acquire(uint64_t worker) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_();
  ExpireWorkers(now);
  LeaseTable::Member* member = leases_.Find(worker);
  if (member == nullptr) return NotRegistered(worker);
  if (!AwaitStart()) {
    WorkUnitDispatcher::Grant wait;  // kWait.
    wait.workers_to_start = static_cast<uint32_t>(WorkersToStart());
    return wait;
  }
  // It may have expired while waiting.
  member = leases_.Find(worker);
  if (member == nullptr) return NotRegistered(worker);
  if (sync()) return AcquireInRound(worker);
  if (options_.consistency.mode == v1::CONSISTENCY_SSP &&
      member->clock > leases_.MinClock() + static_cast<uint64_t>(options_.consistency.ssp_bound)) {
    return WorkUnitDispatcher::Grant{};  // kWait: let the slowest catch up.
  }
  WorkUnitDispatcher::Grant grant = dispatcher_.Acquire(worker, now);
  if (grant.outcome == WorkUnitDispatcher::Outcome::kUnit) {
    member->clock += 1;
    member->units_granted += 1;
  }
  return grant;
}

absl::StatusOr<WorkUnitDispatcher::Grant> Coordinator::AcquireInRound(uint64_t worker) {
  // Nothing for this worker until the next round opens: it gave this round
  // its gradient, or the round is being applied, or every unit is taken.
  auto must_wait = [this, worker]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return round_.closed() || round_.Contributed(worker) ||
           (round_.Held(worker) == nullptr && !dispatcher_.done() && !dispatcher_.has_pending());
  };
  auto may_go = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !must_wait() || !leases_.IsLive(worker);
  };
  if (must_wait()) mu_.AwaitWithTimeout(absl::Condition(&may_go), options_.sync_acquire_wait);
  LeaseTable::Member* member = leases_.Find(worker);
  if (member == nullptr) return NotRegistered(worker);  // It expired while waiting.
  if (must_wait()) return WorkUnitDispatcher::Grant{};  // kWait.
  // A retried Acquire (its first reply lost) gets the same unit back.
  if (const WorkUnitDispatcher::Grant* held = round_.Held(worker)) return *held;
  WorkUnitDispatcher::Grant grant = dispatcher_.Acquire(worker, clock_());
  // A round applies the pushes its commits name; a key shared by a dead
  // lessee's held (and dropped) push would make its re-issue a duplicate.
  grant.push_key.clear();
  if (grant.outcome == WorkUnitDispatcher::Outcome::kUnit) {
    round_.Hold(worker, grant);
    member->clock += 1;
  }
  return grant;
}

absl::StatusOr<bool> Coordinator::Commit(uint64_t worker, uint32_t epoch, uint64_t index,
                                         const std::string& push_id) {
  absl::MutexLock lock(&mu_);
  ExpireWorkers(clock_());
  if (!sync()) {
    absl::StatusOr<bool> duplicate = dispatcher_.Commit(worker, epoch, index);
    if (duplicate.ok() && !*duplicate) leases_.CountCommit(worker);
    return duplicate;
  }
  if (absl::Status s = dispatcher_.CheckLessee(worker, epoch, index); !s.ok()) return s;
  if (push_id.empty() || push_id.size() > kMaxPushIdLength) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sync mode: a commit must name the push that carried the gradient (1 to %d bytes), "
        "got %d bytes",
        kMaxPushIdLength, push_id.size()));
  }
  if (absl::Status s = round_.Contribute(worker, epoch, index, push_id); !s.ok()) return s;
  CloseRoundIfComplete();
  return false;
}

absl::Status Coordinator::Release(uint64_t worker, uint32_t epoch, uint64_t index) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = dispatcher_.CheckLessee(worker, epoch, index); !s.ok()) return s;
  if (sync()) {
    // A unit whose gradient is in the round is not the worker's to give back.
    const WorkUnitDispatcher::Grant* held = round_.Held(worker);
    if (held == nullptr || held->epoch != epoch || held->index != index) {
      return absl::OkStatus();
    }
    round_.Drop(worker);
  }
  absl::Status s = dispatcher_.Release(worker, epoch, index);
  CloseRoundIfComplete();
  return s;
}

std::optional<ClosedRound> Coordinator::AwaitClosedRound(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  // Expiring here closes a round that waits only on a dead worker even
  // when no live worker calls in.
  ExpireWorkers(clock_());
  auto closed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return round_.closed(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&closed), timeout)) return std::nullopt;
  ClosedRound r;
  r.number = round_.number();
  for (const SyncRound::Contribution& c : round_.contributions()) r.push_ids.push_back(c.push_id);
  return r;
}

void Coordinator::FinishRound(uint64_t number, bool applied) {
  absl::MutexLock lock(&mu_);
  if (!round_.closed() || round_.number() != number) return;
  for (const SyncRound::Contribution& c : round_.Advance()) {
    if (applied) {
      absl::StatusOr<bool> duplicate = dispatcher_.Commit(c.worker, c.epoch, c.index);
      if (duplicate.ok() && !*duplicate) leases_.CountCommit(c.worker);
    } else {
      dispatcher_.Release(c.worker, c.epoch, c.index).IgnoreError();
    }
  }
  (applied ? rounds_applied_ : rounds_abandoned_) += 1;
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
    w->set_units_granted(m.units_granted);
    w->set_tokens_per_unit(m.tokens_per_unit);
  }
  p.set_workers_expired(leases_.expired_total());
  p.set_consistency(options_.consistency.mode);
  p.set_ssp_bound(options_.consistency.ssp_bound);
  p.set_local_steps(static_cast<uint32_t>(options_.consistency.local_steps));
  if (!started_) p.set_workers_to_start(static_cast<uint32_t>(WorkersToStart()));
  if (sync()) {
    p.set_sync_rounds_applied(rounds_applied_);
    p.set_sync_rounds_abandoned(rounds_abandoned_);
    p.set_sync_round(round_.number());
    p.set_sync_round_contributions(round_.num_contributions());
  }
  return p;
}

std::string Coordinator::ExportProgress() {
  absl::MutexLock lock(&mu_);
  return dispatcher_.ExportProgress();
}

absl::Status Coordinator::ImportProgress(const std::string& bytes) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = dispatcher_.ImportProgress(bytes); !s.ok()) return s;
  // A job with committed units has started; the gate stays as it is
  // for one restored before any.
  for (const EpochCounts& c : dispatcher_.counts()) started_ = started_ || c.committed > 0;
  // The round's units belonged to the replaced progress; its gradients may
  // be gone from a restarted shard. The next round starts afresh.
  if (!sync()) return absl::OkStatus();
  if (round_.closed() || round_.num_contributions() > 0) rounds_abandoned_ += 1;
  round_.Advance();
  return absl::OkStatus();
}

}  // namespace spotps
