// Presence streams against real shard processes: a client killed between
// two pushes stops counting as a live pusher on every shard at once, not
// after its silence runs out; in local mode one that lives counts however
// long its first round.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "spotps/v1/parameter_server.grpc.pb.h"
#include "tests/support/child_process.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;
using testing::LocalShardCluster;
using testing::TempDir;

// Stats.live_pushers of every shard, in shard order; -1 where a call failed.
std::vector<int> LivePushers(const std::string& addresses) {
  std::vector<int> counts;
  for (absl::string_view address : absl::StrSplit(addresses, ',')) {
    auto stub = v1::ParameterServer::NewStub(
        grpc::CreateChannel(std::string(address), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::StatsResponse stats;
    const grpc::Status s = stub->Stats(&context, v1::StatsRequest(), &stats);
    counts.push_back(s.ok() ? static_cast<int>(stats.live_pushers()) : -1);
  }
  return counts;
}

// Polls until every shard counts `want` live pushers; returns how long it took,
// or an infinite duration if `limit` passed first.
absl::Duration TimeUntilEveryShardCounts(const std::string& addresses, int want,
                                         absl::Duration limit) {
  const absl::Time start = absl::Now();
  while (absl::Now() - start < limit) {
    const std::vector<int> counts = LivePushers(addresses);
    if (std::all_of(counts.begin(), counts.end(), [want](int c) { return c == want; })) {
      return absl::Now() - start;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::InfiniteDuration();
}

// Two spotps-ps processes and a client that joined both and holds its
// presence streams to them.
class PresenceTest : public ::testing::Test {
 protected:
  void StartJoinedClient(const std::string& consistency) {
    auto shards = LocalShardCluster::Start(2, {"--consistency=" + consistency}, dir_.path());
    ASSERT_TRUE(shards.ok()) << shards.status();
    shards_ = *std::move(shards);
    const std::string log = absl::StrCat(dir_.path(), "/client.log");
    auto client =
        ChildProcess::Start({BinaryPath("spotps-test-joined-client"), shards_->addresses()}, log);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    const absl::Status joined =
        client_->WaitForLog(log, "joined, counted by 2 shards", absl::Seconds(30));
    ASSERT_TRUE(joined.ok()) << joined;
  }

  // Kills the client; how long until both shards stop counting it.
  absl::Duration KillAndTimeTheDrop() {
    client_->Signal(SIGKILL);
    EXPECT_TRUE(client_->Wait(absl::Seconds(10)).ok());
    return TimeUntilEveryShardCounts(shards_->addresses(), 0, absl::Seconds(8));
  }

  TempDir dir_;
  std::unique_ptr<LocalShardCluster> shards_;
  std::unique_ptr<ChildProcess> client_;
};

TEST_F(PresenceTest, AClientKilledBetweenPushesStopsCountingOnEveryShardAtOnce) {
  ASSERT_NO_FATAL_FAILURE(StartJoinedClient("async"));
  // Joined before any update: each shard counts it as if it had pushed
  // once, which without a presence stream lasts 10 s (RecentPushers'
  // unknown_silence).
  ASSERT_EQ(LivePushers(shards_->addresses()), std::vector<int>({1, 1}));
  absl::SleepFor(absl::Milliseconds(300));  // Both presence streams are open.
  // The shards poll a stream's end every 100 ms.
  EXPECT_LT(KillAndTimeTheDrop(), absl::Seconds(2));
}

TEST_F(PresenceTest, InLocalModeAnAttendingTrainerCountsThroughARoundLongerThanTheSilence) {
  ASSERT_NO_FATAL_FAILURE(StartJoinedClient("local:64"));
  // A round of 64 steps often takes longer than the 10 s a client that has
  // pushed at most once is counted for by its silence alone; had the shards
  // stopped counting it, every push of its next round would be applied as
  // an update of its own.
  absl::SleepFor(absl::Seconds(11));
  EXPECT_EQ(LivePushers(shards_->addresses()), std::vector<int>({1, 1}));
  // Its stream still tells a kill at once.
  EXPECT_LT(KillAndTimeTheDrop(), absl::Seconds(2));
}

}  // namespace
}  // namespace spotps
