#include "common/crash_report.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace spotps {
namespace {

// Not inlined and not static, so that the report can name it.
__attribute__((noinline)) void WriteThroughNullForTheCrashReport(volatile int* where) {
  *where = 1;
}

void CrashAfterInstalling() {
  InstallCrashReport("crash_report_test");
  WriteThroughNullForTheCrashReport(nullptr);
}

TEST(CrashReportDeathTest, AFaultPrintsItsSignalAndTheFunctionItHappenedIn) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(CrashAfterInstalling(), testing::KilledBySignal(SIGSEGV),
              "SIGSEGV \\(fault address 0x0\\)(.|\n)*WriteThroughNullForTheCrashReport");
}

TEST(CrashReportDeathTest, AnAbortIsReportedAndStillDiesOfSigabrt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        InstallCrashReport("crash_report_test");
        ::abort();
      },
      testing::KilledBySignal(SIGABRT), "SIGABRT(.|\n)*stack of the thread");
}

TEST(CrashReportTest, SigtermKeepsItsDefaultAction) {
  InstallCrashReport("crash_report_test");
  struct sigaction action {};
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &action), 0);
  EXPECT_EQ(action.sa_handler, SIG_DFL);
  ASSERT_EQ(::sigaction(SIGSEGV, nullptr, &action), 0);
  EXPECT_NE(action.sa_handler, SIG_DFL);
}

}  // namespace
}  // namespace spotps
