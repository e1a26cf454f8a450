#include "common/onednn_engine.h"

namespace spotps {

const dnnl::engine& OneDnnCpuEngine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

}  // namespace spotps
