// RecentPushers: which clients still count as live, by their own pace, with
// bounded memory against a client that invents names.
#include "ps/rpc/recent_pushers.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace spotps {
namespace {

const absl::Time t0 = absl::FromUnixSeconds(1000);

absl::Time At(double seconds) { return t0 + absl::Seconds(seconds); }

TEST(RecentPushersTest, AClientIsLiveForThreeOfItsIntervals) {
  RecentPushers pushers;
  for (double t : {0.0, 2.0, 4.0}) pushers.Record("every-2s", At(t));
  pushers.Record("a", At(4.0));
  pushers.Record("a", At(4.1));  // Every 0.1 s: the 1 s floor applies.
  pushers.Record("", At(4.1));   // Unnamed: not counted.
  EXPECT_EQ(pushers.Count(At(4.5)), 2);
  EXPECT_EQ(pushers.Count(At(5.2)), 1);   // "a" silent > 1 s.
  EXPECT_EQ(pushers.Count(At(9.9)), 1);   // "every-2s" silent < 3 x 2 s.
  EXPECT_EQ(pushers.Count(At(10.1)), 0);  // Now > 6 s.
  // A forgotten client counts again once it pushes.
  pushers.Record("a", At(11));
  EXPECT_EQ(pushers.Count(At(11)), 1);
}

TEST(RecentPushersTest, AOneOffPusherCountsForTheUnknownSilence) {
  RecentPushers::Options options;
  options.unknown_silence = absl::Seconds(10);
  RecentPushers pushers(options);
  pushers.Record("once", At(0));
  EXPECT_EQ(pushers.Count(At(9.5)), 1);
  EXPECT_EQ(pushers.Count(At(10.5)), 0);
}

TEST(RecentPushersTest, TheMeanIntervalFollowsAChangedPace) {
  RecentPushers pushers;
  double t = 0;
  for (int i = 0; i < 5; ++i, t += 10) pushers.Record("slowing", At(t));  // Every 10 s.
  t -= 10;
  for (int i = 0; i < 20; ++i) pushers.Record("slowing", At(t += 0.1));  // Then every 0.1 s.
  EXPECT_EQ(pushers.Count(At(t + 0.9)), 1);
  EXPECT_EQ(pushers.Count(At(t + 1.5)), 0);  // Silence now judged by the new pace.
}

TEST(RecentPushersTest, AnAnnouncedClientCountsBeforeItsFirstPush) {
  RecentPushers pushers;
  EXPECT_TRUE(pushers.Announce("joiner", At(0)));
  EXPECT_FALSE(pushers.Announce("joiner", At(0.1)));  // Counted already.
  EXPECT_FALSE(pushers.Announce("", At(0.1)));        // Unnamed: not counted.
  EXPECT_EQ(pushers.Count(At(0.2)), 1);
  // Its first push lands 5 s after it joined; the next 0.1 s later. Its
  // pace is 0.1 s, not the 5 s before its first push: silent for the 1 s
  // floor, it no longer counts.
  pushers.Record("joiner", At(5));
  pushers.Record("joiner", At(5.1));
  EXPECT_EQ(pushers.Count(At(5.9)), 1);
  EXPECT_EQ(pushers.Count(At(6.3)), 0);
}

TEST(RecentPushersTest, AnAnnouncementOfAKnownClientChangesNothing) {
  RecentPushers pushers;
  for (double t : {0.0, 2.0, 4.0}) pushers.Record("every-2s", At(t));
  EXPECT_FALSE(pushers.Announce("every-2s", At(9)));
  EXPECT_EQ(pushers.Count(At(10.1)), 0);  // Silent for 3 x 2 s since its last push.
}

TEST(RecentPushersTest, AnAnnouncedClientThatLeavesNoLongerCounts) {
  RecentPushers pushers;
  pushers.Record("steady", At(0));
  ASSERT_TRUE(pushers.Announce("joined", At(0.5)));
  EXPECT_EQ(pushers.Count(At(0.6)), 2);
  EXPECT_TRUE(pushers.Forget("joined"));
  EXPECT_EQ(pushers.Count(At(0.7)), 1);
}

TEST(RecentPushersTest, KeepsAtMostItsLimitDroppingTheLongestSilent) {
  RecentPushers::Options options;
  options.max_clients = 3;
  RecentPushers pushers(options);
  for (int i = 0; i < 100; ++i) pushers.Record(absl::StrCat("made-up-", i), At(i * 0.01));
  // Only the three latest are kept: all are still within the unknown silence.
  EXPECT_EQ(pushers.Count(At(1)), 3);
  for (int i = 97; i < 100; ++i) pushers.Record(absl::StrCat("made-up-", i), At(1.5));
  EXPECT_EQ(pushers.Count(At(2)), 3);  // The same three: each now has an interval.
}

RecentPushers LocalModePushers() {
  RecentPushers::Options options;
  options.unknown_silence = absl::Seconds(10);
  options.attendance_keeps_live = true;
  return RecentPushers(options);
}

TEST(RecentPushersTest, InLocalModeAnAttendingClientStaysLiveThroughALongRound) {
  RecentPushers pushers = LocalModePushers();
  pushers.Announce("round-of-60s", At(0));
  pushers.Attend("round-of-60s");
  EXPECT_EQ(pushers.Count(At(59)), 1);  // Silent far past the unknown silence.
  pushers.Record("round-of-60s", At(60));
  EXPECT_EQ(pushers.Count(At(119)), 1);
  pushers.Record("round-of-60s", At(120));
  // From its second push its pace judges it, stream or not: a trainer that
  // hangs with its connection open drops out after 3 x 60 s.
  EXPECT_EQ(pushers.Count(At(299)), 1);
  EXPECT_EQ(pushers.Count(At(301)), 0);
}

TEST(RecentPushersTest, AttendingAloneNeverCountsAClient) {
  RecentPushers pushers = LocalModePushers();
  pushers.Attend("no-push-yet");
  EXPECT_EQ(pushers.Count(At(0)), 0);
  pushers.Record("no-push-yet", At(1));  // Counted from its first push.
  EXPECT_EQ(pushers.Count(At(30)), 1);
}

TEST(RecentPushersTest, AClientCountsWhileAnyOfItsStreamsIsOpen) {
  RecentPushers pushers = LocalModePushers();
  pushers.Record("reopening", At(0));
  pushers.Attend("reopening");
  pushers.Attend("reopening");  // Its next stream opens before the old one ends.
  pushers.Depart("reopening");
  EXPECT_EQ(pushers.Count(At(30)), 1);
  pushers.Depart("reopening");
  EXPECT_EQ(pushers.Count(At(31)), 0);
  pushers.Depart("never-attended");  // Changes nothing.
}

TEST(RecentPushersTest, OutsideLocalModeAttendanceDoesNotOutlastTheSilence) {
  RecentPushers::Options options;
  options.unknown_silence = absl::Seconds(10);
  RecentPushers pushers(options);
  pushers.Record("in-a-long-eval", At(0));
  pushers.Attend("in-a-long-eval");
  EXPECT_EQ(pushers.Count(At(9)), 1);
  EXPECT_EQ(pushers.Count(At(11)), 0);
}

TEST(RecentPushersTest, TheMedianIntervalCountsOnlyClientsWithAKnownPace) {
  RecentPushers pushers;
  EXPECT_EQ(pushers.MedianInterval(), absl::ZeroDuration());
  pushers.Record("once", At(0));
  EXPECT_EQ(pushers.MedianInterval(), absl::ZeroDuration());
  pushers.Record("every-10s", At(0));
  pushers.Record("every-10s", At(10));
  pushers.Record("every-20s", At(0));
  pushers.Record("every-20s", At(20));
  pushers.Record("every-60s", At(0));
  pushers.Record("every-60s", At(60));
  EXPECT_EQ(pushers.MedianInterval(), absl::Seconds(20));
}

}  // namespace
}  // namespace spotps
