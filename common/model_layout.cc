#include "common/model_layout.h"

#include <unordered_set>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace spotps {
namespace {

// FNV-1a: stable across processes and builds, unlike std::hash.
class Fnv1a {
 public:
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      hash_ ^= p[i];
      hash_ *= 0x100000001b3ULL;
    }
  }
  void AddInt(int64_t v) { Add(&v, sizeof(v)); }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

absl::Status ValidateName(const std::string& name, std::unordered_set<std::string>& seen) {
  if (name.empty()) return absl::InvalidArgumentError("tensor name is empty");
  if (name.size() > ModelLayout::kMaxNameLength) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor name of %d bytes exceeds the limit of %d", name.size(),
                        ModelLayout::kMaxNameLength));
  }
  for (unsigned char c : name) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat("tensor name '", absl::CHexEscape(name),
                                                     "' has a byte outside printable ASCII"));
    }
  }
  if (!seen.insert(name).second) {
    return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name '", name, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelLayout> ModelLayout::Create(
    std::vector<std::pair<std::string, std::vector<int64_t>>> tensors) {
  if (tensors.empty()) return absl::InvalidArgumentError("layout has no tensors");
  if (tensors.size() > kMaxTensors) {
    return absl::InvalidArgumentError(
        absl::StrFormat("layout has %d tensors, the limit is %d", tensors.size(), kMaxTensors));
  }
  ModelLayout layout;
  std::unordered_set<std::string> seen;
  Fnv1a hash;
  for (auto& [name, shape] : tensors) {
    if (absl::Status s = ValidateName(name, seen); !s.ok()) return s;
    if (shape.size() > kMaxRank) {
      return absl::InvalidArgumentError(absl::StrFormat("tensor '%s' has rank %d, the limit is %d",
                                                        name, shape.size(), kMaxRank));
    }
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d <= 0 || d > kMaxTotalElements || n > kMaxTotalElements / d) {
        return absl::InvalidArgumentError(
            absl::StrFormat("tensor '%s' has shape [%s]: every dimension must be positive and the "
                            "model at most %d elements",
                            name, absl::StrJoin(shape, ","), kMaxTotalElements));
      }
      n *= d;
    }
    if (layout.total_elements_ + n > kMaxTotalElements) {
      return absl::InvalidArgumentError(
          absl::StrFormat("layout exceeds %d elements at tensor '%s'", kMaxTotalElements, name));
    }
    hash.Add(name.data(), name.size());
    hash.AddInt(static_cast<int64_t>(shape.size()));
    for (int64_t d : shape) hash.AddInt(d);
    layout.tensors_.push_back(
        TensorSlot{std::move(name), std::move(shape), n, layout.total_elements_});
    layout.total_elements_ += n;
  }
  layout.fingerprint_ = hash.value();
  return layout;
}

absl::StatusOr<ModelLayout> ModelLayout::FromProto(const v1::ModelLayout& proto) {
  if (proto.tensors_size() > kMaxTensors) {
    return absl::InvalidArgumentError(absl::StrFormat("layout has %d tensors, the limit is %d",
                                                      proto.tensors_size(), kMaxTensors));
  }
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;
  tensors.reserve(proto.tensors_size());
  for (const v1::TensorSpec& t : proto.tensors()) {
    if (t.dtype() != v1::DTYPE_FP32) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", absl::CHexEscape(t.name()),
                                                     "' has dtype ", v1::DType_Name(t.dtype()),
                                                     "; master weights must be DTYPE_FP32"));
    }
    tensors.emplace_back(t.name(), std::vector<int64_t>(t.shape().begin(), t.shape().end()));
  }
  return Create(std::move(tensors));
}

v1::ModelLayout ModelLayout::ToProto() const {
  v1::ModelLayout proto;
  for (const TensorSlot& t : tensors_) {
    v1::TensorSpec* spec = proto.add_tensors();
    spec->set_name(t.name);
    for (int64_t d : t.shape) spec->add_shape(d);
    spec->set_dtype(v1::DTYPE_FP32);
  }
  return proto;
}

const TensorSlot* ModelLayout::Find(absl::string_view name) const {
  for (const TensorSlot& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string ModelLayout::Summary() const {
  return absl::StrFormat("%d tensors, %d elements, fingerprint %016x", tensors_.size(),
                         total_elements_, fingerprint_);
}

}  // namespace spotps
