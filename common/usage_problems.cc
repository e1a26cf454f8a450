#include "common/usage_problems.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace spotps {

bool UsageProblems::Require(bool ok, absl::string_view problem) {
  if (!ok) problems_.emplace_back(problem);
  return ok;
}

bool UsageProblems::Check(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return true;
  problems_.push_back(context.empty() ? std::string(status.message())
                                      : absl::StrCat(context, ": ", status.message()));
  return false;
}

absl::Status UsageProblems::ToStatus() const {
  if (problems_.empty()) return absl::OkStatus();
  if (problems_.size() == 1) return absl::InvalidArgumentError(problems_[0]);
  return absl::InvalidArgumentError(absl::StrCat(problems_.size(), " problems:\n  ",
                                                 absl::StrJoin(problems_, "\n  ")));
}

}  // namespace spotps
