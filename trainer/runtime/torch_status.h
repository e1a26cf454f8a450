// The boundary between LibTorch, which reports errors by throwing c10::Error,
// and the rest of spotps, which reports them as absl::Status.

#ifndef SPOTPS_TRAINER_RUNTIME_TORCH_STATUS_H_
#define SPOTPS_TRAINER_RUNTIME_TORCH_STATUS_H_

#include <c10/util/Exception.h>

#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace spotps {

// Maps LibTorch's error classes onto status codes: index, value and type
// errors are the caller's fault (InvalidArgument), everything else Internal.
// The message keeps LibTorch's text without its C++ backtrace.
absl::Status StatusFromTorchError(const c10::Error& error);

// Runs `fn` and returns its result, or the Status for the c10::Error it threw.
template <typename Fn>
absl::StatusOr<std::invoke_result_t<Fn>> CatchTorchErrors(Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const c10::Error& error) {
    return StatusFromTorchError(error);
  }
}

}  // namespace spotps

#endif  // SPOTPS_TRAINER_RUNTIME_TORCH_STATUS_H_
