#include "trainer/elastic/join_timeline.h"

#include <time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace spotps {
namespace {

// Field 22 of /proc/self/stat: start time in clock ticks since boot. The
// second field (the command name, in parentheses) may hold spaces, so the
// fields are counted from the last ')'.
bool ReadStartTicks(uint64_t* ticks) {
  std::ifstream in("/proc/self/stat");
  std::stringstream text;
  text << in.rdbuf();
  const std::string stat = text.str();
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(close + 1), ' ', absl::SkipEmpty());
  constexpr size_t kStartTimeAfterName = 22 - 3;  // Fields 3.. follow the name.
  return fields.size() > kStartTimeAfterName &&
         absl::SimpleAtoi(fields[kStartTimeAfterName], ticks);
}

}  // namespace

absl::Time ProcessStartTime() {
  const absl::Time now = absl::Now();
  uint64_t ticks = 0;
  timespec since_boot{};
  const long hz = sysconf(_SC_CLK_TCK);
  if (!ReadStartTicks(&ticks) || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &since_boot) != 0) {
    return now;
  }
  const absl::Duration age =
      absl::DurationFromTimespec(since_boot) - absl::Seconds(static_cast<double>(ticks) / hz);
  // A clock oddity must not put the start in the future or days back.
  if (age < absl::ZeroDuration() || age > absl::Hours(1)) return now;
  return now - age;
}

JoinTimeline::JoinTimeline() : JoinTimeline(ProcessStartTime()) { Mark("exec"); }

JoinTimeline::JoinTimeline(absl::Time process_start)
    : process_start_(process_start), last_mark_(process_start) {}

void JoinTimeline::Mark(absl::string_view phase) {
  const absl::Time now = absl::Now();
  Add(phase, now - last_mark_);
  last_mark_ = now;
}

void JoinTimeline::Add(absl::string_view phase, absl::Duration duration) {
  phases_.emplace_back(std::string(phase), duration);
}

std::string JoinTimeline::Line() const {
  std::string line = "join:";
  for (const auto& [phase, duration] : phases_) {
    absl::StrAppend(&line, absl::StrFormat(" %s_s=%.3f", phase, absl::ToDoubleSeconds(duration)));
  }
  return line;
}

}  // namespace spotps
