// UsageProblems: every mistake in a program's flags and local inputs,
// reported together, so that fixing one does not merely reveal the next.
//
//   UsageProblems problems;
//   problems.Check(ValidateSomething());
//   if (problems.Require(!path.empty(), "--data is required")) ...
//   if (!problems.empty()) return UsageError(problems.ToStatus());
#ifndef SPOTPS_COMMON_USAGE_PROBLEMS_H_
#define SPOTPS_COMMON_USAGE_PROBLEMS_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

// Owns the list of problems found so far, in the order found.
class UsageProblems {
 public:
  void Add(absl::string_view problem) { problems_.emplace_back(problem); }
  // Records `problem` unless `ok`; returns `ok`.
  bool Require(bool ok, absl::string_view problem);
  // Records `status`'s message, after `context` ("--data: ...") when given,
  // unless it is OK; returns status.ok().
  bool Check(const absl::Status& status, absl::string_view context = "");
  // The value, or nullopt after recording the error as Check does.
  template <typename T>
  std::optional<T> Take(absl::StatusOr<T> value, absl::string_view context = "") {
    if (!Check(value.status(), context)) return std::nullopt;
    return *std::move(value);
  }

  bool empty() const { return problems_.empty(); }
  const std::vector<std::string>& problems() const { return problems_; }
  // INVALID_ARGUMENT listing every problem, one per line ("3 problems: ..."),
  // or OK when there is none.
  absl::Status ToStatus() const;

 private:
  std::vector<std::string> problems_;
};

}  // namespace spotps

#endif  // SPOTPS_COMMON_USAGE_PROBLEMS_H_
