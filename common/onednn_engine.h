#ifndef SPOTPS_COMMON_ONEDNN_ENGINE_H_
#define SPOTPS_COMMON_ONEDNN_ENGINE_H_

#include "oneapi/dnnl/dnnl.hpp"

namespace spotps {

// The process's oneDNN CPU engine, created on first use and never destroyed
// (so no static destructor can outlive it). Every oneDNN call in spotps
// binds to this one engine.
const dnnl::engine& OneDnnCpuEngine();

}  // namespace spotps

#endif  // SPOTPS_COMMON_ONEDNN_ENGINE_H_
