#include "ps/checkpoint/checkpoint_round_driver.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"

namespace spotps {

CheckpointRoundDriver::CheckpointRoundDriver(ShardStore* store, ShardCheckpointer* own,
                                             Coordinator* coordinator, PeerShards* peers,
                                             const CheckpointRoundOptions& options)
    : store_(store),
      own_(own),
      coordinator_(coordinator),
      peers_(peers),
      options_(options),
      incarnations_(peers->size(), 0),
      loop_(options.peer_poll, [this] { Tick(); }) {}

CheckpointRoundDriver::~CheckpointRoundDriver() { loop_.Stop(); }

void CheckpointRoundDriver::Start() {
  next_round_ = absl::Now() + options_.every;
  loop_.Start();
}

void CheckpointRoundDriver::Tick() {
  WatchPeers();
  if (options_.every <= absl::ZeroDuration() || absl::Now() < next_round_) return;
  next_round_ = absl::Now() + options_.every;
  absl::StatusOr<v1::CheckpointNowResponse> r = RunNow();
  if (!r.ok() && !absl::IsFailedPrecondition(r.status())) {
    LogWarningF("checkpoint round failed: %s", r.status().ToString());
  }
}

absl::StatusOr<uint64_t> CheckpointRoundDriver::PrepareRound() {
  uint64_t newest = own_->last_written_id();
  for (size_t i = 0; i < peers_->size(); ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    v1::StatsResponse stats;
    grpc::Status s = peers_->stub(i).Stats(&ctx, v1::StatsRequest(), &stats);
    if (!s.ok()) {
      return absl::UnavailableError(
          absl::StrCat("checkpoint round: shard at ", peers_->address(i), ": ", s.error_message()));
    }
    if (incarnations_[i] != 0 && stats.incarnation() != incarnations_[i]) {
      return absl::UnavailableError(absl::StrCat("checkpoint round: shard at ", peers_->address(i),
                                                 " restarted; waiting for its rollback"));
    }
    incarnations_[i] = stats.incarnation();
    newest = std::max(newest, stats.last_checkpoint_id());
  }
  if (newest == ~uint64_t{0}) {
    return absl::OutOfRangeError("checkpoint ids are exhausted (a shard holds id 2^64-1)");
  }
  return newest + 1;
}

absl::StatusOr<v1::CheckpointNowResponse> CheckpointRoundDriver::RunNow() {
  absl::MutexLock lock(&mu_);
  if (!store_->initialized()) {
    return absl::FailedPreconditionError("no checkpoint: the model is not initialised yet");
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<uint64_t> next = PrepareRound();
  if (!next.ok()) return next.status();
  const uint64_t id = *next;
  // Progress first: see the file comment for why this order loses nothing.
  const std::string progress = coordinator_ != nullptr ? coordinator_->ExportProgress() : "";
  absl::StatusOr<CheckpointWriteResult> mine = own_->Write(id, *store_, progress);
  if (!mine.ok()) return mine.status();
  std::vector<absl::Status> results =
      peers_->CallAll(RetryPolicy{absl::Seconds(120), 3, absl::Milliseconds(200), absl::Seconds(2)},
                      "WriteCheckpoint", [&](size_t i, grpc::ClientContext* ctx) {
                        v1::WriteCheckpointRequest request;
                        request.set_checkpoint_id(id);
                        request.set_expected_incarnation(incarnations_[i]);
                        v1::WriteCheckpointResponse response;
                        return peers_->stub(i).WriteCheckpoint(ctx, request, &response);
                      });
  if (absl::Status s = FirstError(results); !s.ok()) return s;
  v1::CheckpointNowResponse response;
  response.set_checkpoint_id(id);
  response.set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  LogInfoF("checkpoint %d written by %d shards in %.2f s", id, peers_->size() + 1,
           response.seconds());
  return response;
}

void CheckpointRoundDriver::WatchPeers() {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < peers_->size(); ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    v1::StatsResponse stats;
    if (!peers_->stub(i).Stats(&ctx, v1::StatsRequest(), &stats).ok()) continue;
    const bool restarted = incarnations_[i] != 0 && stats.incarnation() != incarnations_[i];
    incarnations_[i] = stats.incarnation();
    if (!restarted) continue;
    const uint64_t k = stats.restored_checkpoint_id();
    if (k == 0) {
      LogWarningF("shard %d restarted without a checkpoint: its partitions are lost", i + 1);
      continue;
    }
    if (coordinator_ == nullptr) continue;
    absl::StatusOr<std::string> progress = own_->ExtraBlobOf(k);
    absl::Status s = progress.ok() ? coordinator_->ImportProgress(*progress) : progress.status();
    LogInfoF(
        "shard %d restarted from checkpoint %d: data progress rolled back to it (%s); units done "
        "since are trained again",
        i + 1, k, s.ok() ? "ok" : s.ToString());
  }
}

}  // namespace spotps
