// ModelLayout: the named FP32 tensors of a model, in a fixed order, and their
// place in the flat parameter space that the parameter server partitions.
#ifndef SPOTPS_COMMON_MODEL_LAYOUT_H_
#define SPOTPS_COMMON_MODEL_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spotps/v1/parameter_server.pb.h"

namespace spotps {

struct TensorSlot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t num_elements = 0;
  int64_t flat_offset = 0;  // First element in the flat parameter space.
};

// Owns the validated list of tensors of one model. Promises: names are unique
// and printable, every dimension is positive, the flat space is the tensors
// laid end to end in layout order, and the fingerprint depends on exactly the
// names and shapes (so two processes agree on it iff they agree on the model).
class ModelLayout {
 public:
  // Hard limits applied to any layout, including ones that arrive from the
  // network: they bound the memory a hostile request can make a shard reserve.
  static constexpr int kMaxTensors = 1 << 16;
  static constexpr int kMaxNameLength = 512;
  static constexpr int kMaxRank = 8;
  static constexpr int64_t kMaxTotalElements = int64_t{1} << 33;  // 32 GiB FP32.

  ModelLayout() = default;

  // Builds a layout from (name, shape) pairs, validating them.
  static absl::StatusOr<ModelLayout> Create(
      std::vector<std::pair<std::string, std::vector<int64_t>>> tensors);
  // Validates a layout received from the wire (dtype must be FP32).
  static absl::StatusOr<ModelLayout> FromProto(const v1::ModelLayout& proto);

  v1::ModelLayout ToProto() const;

  const std::vector<TensorSlot>& tensors() const { return tensors_; }
  int64_t total_elements() const { return total_elements_; }
  uint64_t fingerprint() const { return fingerprint_; }
  bool empty() const { return tensors_.empty(); }

  // Returns the tensor with this name, or nullptr.
  const TensorSlot* Find(absl::string_view name) const;

  // One line for messages: "N tensors, M elements, fingerprint 0x...".
  std::string Summary() const;

 private:
  std::vector<TensorSlot> tensors_;
  int64_t total_elements_ = 0;
  uint64_t fingerprint_ = 0;
};

}  // namespace spotps

#endif  // SPOTPS_COMMON_MODEL_LAYOUT_H_
