#include "ps/sync_rounds.h"

#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <future>

namespace spotps {
namespace {

// A peer that stays unreachable this long gives the round up; one that
// restarted answers NOT_FOUND at once.
const RetryPolicy kApplyRetry{absl::Seconds(30), 8, absl::Milliseconds(100), absl::Seconds(2)};
constexpr uint64_t kLogEvery = 100;

}  // namespace

SyncRounds::SyncRounds(ShardStore* store, Coordinator* coordinator, PeerShards* peers)
    : store_(store), coordinator_(coordinator), peers_(peers) {}

SyncRounds::~SyncRounds() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void SyncRounds::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void SyncRounds::Loop() {
  while (!stop_.HasBeenNotified()) {
    std::optional<ClosedRound> round = coordinator_->AwaitClosedRound(absl::Milliseconds(500));
    if (!round.has_value()) continue;
    const absl::Status applied = Apply(*round);
    coordinator_->FinishRound(round->number, applied.ok());
    if (!applied.ok()) {
      std::fprintf(stderr,
                   "spotps-ps: sync round %llu given up (%s); its %zu units are trained again\n",
                   static_cast<unsigned long long>(round->number), applied.ToString().c_str(),
                   round->push_ids.size());
    } else if (round->number % kLogEvery == 0) {
      std::printf("spotps-ps: sync round %llu applied (%zu gradients)\n",
                  static_cast<unsigned long long>(round->number), round->push_ids.size());
      std::fflush(stdout);
    }
  }
}

absl::Status SyncRounds::Apply(const ClosedRound& round) {
  std::future<absl::Status> own = std::async(std::launch::async, [&] {
    return store_->ApplyRound(round.push_ids).status();
  });
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
