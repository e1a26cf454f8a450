#include "trainer/runtime/torch_status.h"

#include "absl/strings/str_cat.h"

namespace spotps {

absl::Status StatusFromTorchError(const c10::Error& error) {
  const std::string message = absl::StrCat("LibTorch: ", error.what_without_backtrace());
  if (dynamic_cast<const c10::IndexError*>(&error) != nullptr ||
      dynamic_cast<const c10::ValueError*>(&error) != nullptr ||
      dynamic_cast<const c10::TypeError*>(&error) != nullptr) {
    return absl::InvalidArgumentError(message);
  }
  if (dynamic_cast<const c10::NotImplementedError*>(&error) != nullptr) {
    return absl::UnimplementedError(message);
  }
  if (dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

}  // namespace spotps
