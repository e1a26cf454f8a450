#ifndef SPOTPS_COMMON_ONEDNN_ENGINE_H_
#define SPOTPS_COMMON_ONEDNN_ENGINE_H_

#include "oneapi/dnnl/dnnl.hpp"

namespace spotps {

// The process's oneDNN CPU engine, created on first use and never destroyed
// (primitives may run from static destructors' threads). Every oneDNN call in
// spotps binds to this one engine, so they share oneDNN's primitive cache.
const dnnl::engine& OneDnnCpuEngine();

}  // namespace spotps

#endif  // SPOTPS_COMMON_ONEDNN_ENGINE_H_
