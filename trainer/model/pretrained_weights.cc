#include "trainer/model/pretrained_weights.h"

#include "absl/strings/str_cat.h"
#include "client/hf_gpt2_names.h"
#include "client/safetensors_file.h"
#include "trainer/model/parameter_binding.h"
#include "trainer/runtime/torch_status.h"

namespace spotps {

absl::Status LoadPretrainedWeights(GptModel& model, const std::string& path) {
  absl::StatusOr<ParameterBinding> binding = ParameterBinding::Create(*model);
  if (!binding.ok()) return binding.status();
  absl::StatusOr<SafetensorsContents> file = ReadSafetensorsFile(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<std::vector<float>> flat = FlatWeightsFromHfGpt2(binding->layout(), *file);
  if (!flat.ok()) {
    return absl::Status(flat.status().code(), absl::StrCat(path, ": ", flat.status().message()));
  }
  binding->LoadWeights(*flat);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> LogitsFor(TrainableModel& model,
                                                          const std::vector<int64_t>& tokens,
                                                          ComputeDType dtype) {
  return CatchTorchErrors([&] {
    torch::NoGradGuard no_grad;
    ComputePrecisionScope precision(dtype);
    const torch::Tensor input =
        torch::tensor(tokens, torch::kLong).view({1, static_cast<int64_t>(tokens.size())});
    TrainingBatch batch;
    batch.input_ids = input;
    const torch::Tensor logits = model.Forward(batch).to(torch::kFloat).contiguous()[0];
    std::vector<std::vector<float>> out(tokens.size());
    for (size_t t = 0; t < tokens.size(); ++t) {
      const float* row = logits[int64_t(t)].data_ptr<float>();
      out[t].assign(row, row + logits.size(1));
    }
    return out;
  });
}

}  // namespace spotps
