// libFuzzer target: a safetensors file comes from anywhere (the Hub, a
// colleague, a half-written download) before spotps-ctl import or
// spotps-trainer --init_from reads it. Any bytes must be refused or give
// tensors that write back and read again as the same values, bit for bit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "client/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<spotps::SafetensorsContents> parsed =
      spotps::ParseSafetensors(std::string(reinterpret_cast<const char*>(data), size));
  if (!parsed.ok()) {
    if (parsed.status().message().empty()) std::abort();  // Every refusal says why.
    return 0;
  }
  // F32 holds every value of every dtype read, exactly.
  absl::StatusOr<std::string> bytes =
      spotps::SerializeSafetensors(*parsed, spotps::SafetensorsDType::kF32);
  if (!bytes.ok()) std::abort();
  absl::StatusOr<spotps::SafetensorsContents> again = spotps::ParseSafetensors(*bytes);
  if (!again.ok() || again->tensors.size() != parsed->tensors.size() ||
      again->metadata != parsed->metadata) {
    std::abort();
  }
  for (size_t i = 0; i < parsed->tensors.size(); ++i) {
    const auto& a = parsed->tensors[i];
    const auto& b = again->tensors[i];
    if (a.name != b.name || a.shape != b.shape || a.values.size() != b.values.size() ||
        (!a.values.empty() &&
         std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)) != 0)) {
      std::abort();
    }
  }
  return 0;
}
