#include "ps/coordination/sync_round_driver.h"

#include <grpcpp/grpcpp.h>

#include <future>

#include "common/log.h"

namespace spotps {
namespace {

// A peer that stays unreachable this long gives the round up; one that
// restarted answers NOT_FOUND at once.
const RetryPolicy kApplyRetry{absl::Seconds(30), 8, absl::Milliseconds(100), absl::Seconds(2)};
constexpr uint64_t kLogEvery = 100;

}  // namespace

SyncRoundDriver::SyncRoundDriver(ShardStore* store, Coordinator* coordinator, PeerShards* peers)
    : store_(store),
      coordinator_(coordinator),
      peers_(peers),
      loop_(absl::ZeroDuration(), [this] { Tick(); }) {}

SyncRoundDriver::~SyncRoundDriver() { loop_.Stop(); }

void SyncRoundDriver::Start() { loop_.Start(); }

void SyncRoundDriver::Tick() {
  // A bounded wait, so that Stop() is noticed within it.
  std::optional<ClosedRound> round = coordinator_->AwaitClosedRound(absl::Milliseconds(500));
  if (!round.has_value()) return;
  const absl::Status applied = Apply(*round);
  coordinator_->FinishRound(round->number, applied.ok());
  if (!applied.ok()) {
    LogWarningF("sync round %d given up (%s); its %d units are trained again", round->number,
                applied.ToString(), round->push_ids.size());
  } else if (round->number % kLogEvery == 0) {
    LogInfoF("sync round %d applied (%d gradients)", round->number, round->push_ids.size());
  }
}

absl::Status SyncRoundDriver::Apply(const ClosedRound& round) {
  std::future<absl::Status> own =
      std::async(std::launch::async, [&] { return store_->ApplyRound(round.push_ids).status(); });
  v1::ApplyRoundRequest request;
  for (const std::string& id : round.push_ids) request.add_push_ids(id);
  std::vector<absl::Status> results =
      peers_->CallAll(kApplyRetry, "ApplyRound", [&](size_t i, grpc::ClientContext* ctx) {
        v1::ApplyRoundResponse response;
        return peers_->stub(i).ApplyRound(ctx, request, &response);
      });
  results.push_back(own.get());
  return FirstError(results);
}

}  // namespace spotps
