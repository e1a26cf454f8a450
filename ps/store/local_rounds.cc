#include "ps/store/local_rounds.h"

namespace spotps {

float LocalRounds::ShareOfK(uint32_t count, size_t k) const {
  return count < k ? static_cast<float>(count) / static_cast<float>(k) : 1.0f;
}

}  // namespace spotps
