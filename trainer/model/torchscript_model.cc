#include "trainer/model/torchscript_model.h"

#include <sys/stat.h>

#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/safetensors_file.h"
#include "trainer/model/script_kernels.h"
#include "trainer/runtime/torch_status.h"

namespace spotps {
namespace {

constexpr char kExportHint[] =
    "export with torch.jit.script(model) (or torch.jit.trace) and .save(PATH), using torch 1.13 "
    "(Debian's /usr/bin/python3; tools/models/export_model.py shows how)";

absl::Status Refuse(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--model=", path, ": ", why));
}

std::string FirstBytes(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes(n, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(n));
  bytes.resize(static_cast<size_t>(in.gcount()));
  return bytes;
}

// Why torch::jit::load refused the file, in the user's terms.
absl::Status NotTorchScript(const std::string& path, const std::string& error) {
  const std::string head = FirstBytes(path, 4);
  if (absl::StartsWith(head, "\x80")) {
    return Refuse(path, absl::StrCat("a pickle from torch.save() (an older, non-zip one), not a "
                                     "TorchScript module; ",
                                     kExportHint));
  }
  if (!absl::StartsWith(head, "PK\x03\x04")) {
    return Refuse(path, absl::StrCat("not a TorchScript file (a TorchScript file is a zip "
                                     "archive); ",
                                     kExportHint));
  }
  if (absl::StrContains(error, "constants.pkl") || absl::StrContains(error, "code/")) {
    return Refuse(path, absl::StrCat("a torch.save() pickle (a state dict, or a whole nn.Module "
                                     "pickled), not a TorchScript module; ",
                                     kExportHint));
  }
  if (absl::StrContains(error, "central directory") || absl::StrContains(error, "truncated") ||
      absl::StrContains(error, "file read failed")) {
    return Refuse(path, "the archive is truncated or damaged (copy the file again)");
  }
  // The first line of LibTorch's message (the rest is its C++ backtrace).
  const std::string first_line = error.substr(0, error.find('\n'));
  return Refuse(path, absl::StrCat("LibTorch 1.13 cannot load it (", first_line,
                                   "); files from torch 2.x use operators it lacks: ",
                                   kExportHint));
}

// lm or classify, from forward's arguments after self.
absl::StatusOr<Task> TaskOfForward(const std::string& path, torch::jit::Module& module) {
  if (!module.find_method("forward").has_value()) {
    return Refuse(path, "the module has no forward method");
  }
  const c10::FunctionSchema& schema = module.get_method("forward").function().getSchema();
  const auto& args = schema.arguments();
  bool tensors = args.size() == 2 || args.size() == 3;
  for (size_t i = 1; tensors && i < args.size(); ++i) {
    tensors = args[i].type()->kind() == c10::TypeKind::TensorType && !args[i].default_value();
  }
  tensors = tensors && schema.returns().size() == 1 &&
            schema.returns()[0].type()->kind() == c10::TypeKind::TensorType;
  if (!tensors) {
    std::ostringstream text;
    text << schema;
    return Refuse(path, absl::StrCat("forward must be forward(input_ids) -> logits (task lm) or "
                                     "forward(input_ids, attention_mask) -> logits (task "
                                     "classify), all Tensors; this file's is ",
                                     text.str()));
  }
  return args.size() == 2 ? Task::kLanguageModel : Task::kClassification;
}

absl::StatusOr<ModelLimits> LimitsOf(const std::string& path, torch::jit::Module& module) {
  ModelLimits limits;
  for (auto [name, field] : {std::make_pair("context_len", &limits.context_len),
                             std::make_pair("vocab_size", &limits.vocab_size),
                             std::make_pair("num_classes", &limits.num_classes)}) {
    if (!module.hasattr(name)) continue;
    const c10::IValue value = module.attr(name);
    if (!value.isInt() || value.toInt() <= 0) {
      return Refuse(path, absl::StrCat("attribute ", name, " must be a positive int"));
    }
    *field = value.toInt();
  }
  return limits;
}

// Trained parameters, each tensor once: a tied one is seen under every
// name that refers to it, and kept under the first.
absl::StatusOr<std::vector<std::pair<std::string, torch::Tensor>>> TrainedParameters(
    const std::string& path, torch::jit::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> trained;
  std::set<const void*> seen;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    const torch::Tensor& t = p.value;
    if (!t.requires_grad()) continue;  // Frozen: stays as the file has it.
    if (!seen.insert(t.unsafeGetTensorImpl()).second) continue;
    if (t.scalar_type() != torch::kFloat32) {
      return Refuse(path, absl::StrCat("parameter ", p.name, " is ",
                                       c10::toString(t.scalar_type()),
                                       ": spotps keeps FP32 master weights and computes in BF16 "
                                       "itself; export the model after model.float()"));
    }
    if (!t.is_contiguous() || t.numel() == 0) {
      return Refuse(path, absl::StrCat("parameter ", p.name, " is empty or not contiguous"));
    }
    trained.emplace_back(p.name, t);
  }
  if (trained.empty()) return Refuse(path, "it has no parameter that requires grad: nothing to train");
  return trained;
}

}  // namespace

bool IsModelFile(const std::string& model_flag) {
  return absl::StrContains(model_flag, '/') || absl::EndsWith(model_flag, ".pt") ||
         absl::EndsWith(model_flag, ".pth");
}

TorchScriptModel::TorchScriptModel(torch::jit::Module module, std::string path, Task task,
                                   ModelLimits limits,
                                   std::vector<std::pair<std::string, torch::Tensor>> trained)
    : module_(std::move(module)),
      path_(std::move(path)),
      task_(task),
      limits_(limits),
      trained_(std::move(trained)) {}

absl::StatusOr<std::unique_ptr<TorchScriptModel>> TorchScriptModel::Load(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Refuse(path, "no such file");
  }
  // The legacy executor: the profiling one (1.13's default) specializes a
  // graph to the shapes it saw and compiles it again for each new batch
  // shape (the first-batch probe, a join ramp's short first step, the last
  // validation batch): seconds per shape for a `small` model, and no faster
  // steps once it settles on CPU.
  if (getenv("SPOTPS_JIT_PROFILING") == nullptr) torch::jit::getProfilingMode() = false;
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const std::exception& e) {
    return NotTorchScript(path, e.what());
  }
  absl::StatusOr<Task> task = TaskOfForward(path, module);
  if (!task.ok()) return task.status();
  absl::StatusOr<ModelLimits> limits = LimitsOf(path, module);
  if (!limits.ok()) return limits.status();
  absl::StatusOr<std::vector<std::pair<std::string, torch::Tensor>>> trained =
      TrainedParameters(path, module);
  if (!trained.ok()) return trained.status();
  module.train();
  UseSpotpsKernels(module);
  return std::unique_ptr<TorchScriptModel>(new TorchScriptModel(
      std::move(module), path, *task, *limits, *std::move(trained)));
}

std::string TorchScriptModel::name() const { return absl::StrCat(path_, " (TorchScript)"); }

torch::Tensor TorchScriptModel::Forward(const TrainingBatch& batch) {
  std::vector<c10::IValue> inputs = {batch.input_ids};
  if (task_ == Task::kClassification) inputs.push_back(batch.attention_mask);
  const c10::IValue out = module_.forward(std::move(inputs));
  TORCH_CHECK_VALUE(out.isTensor(), "forward returned ", out.tagKind(), ", not a Tensor");
  return out.toTensor();
}

absl::StatusOr<std::string> TorchScriptModel::LoadWeightsFile(const std::string& path) {
  absl::StatusOr<SafetensorsContents> file = ReadSafetensorsFile(path);
  if (!file.ok()) return file.status();
  std::vector<std::pair<torch::Tensor, const SafetensorsTensor*>> loads;
  std::vector<std::string> missing;
  std::set<std::string> used;
  for (const auto& [name, param] : trained_) {
    const SafetensorsTensor* t = file->Find(name);
    if (t == nullptr) {
      missing.push_back(name);
      continue;
    }
    if (t->shape != param.sizes().vec()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor ", name, " has shape [", absl::StrJoin(t->shape, ","),
          "], the model's is [", absl::StrJoin(param.sizes(), ","), "]"));
    }
    loads.emplace_back(param, t);
    used.insert(name);
  }
  if (loads.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": none of its ", file->tensors.size(), " tensors is named like a parameter of ",
        path_, " (", trained_.front().first, ", ...)"));
  }
  torch::NoGradGuard no_grad;
  for (const auto& [param, t] : loads) {
    std::memcpy(param.data_ptr<float>(), t->values.data(), t->values.size() * sizeof(float));
  }
  std::vector<std::string> unused;
  for (const SafetensorsTensor& t : file->tensors) {
    if (used.count(t.name) == 0) unused.push_back(t.name);
  }
  std::string line = absl::StrCat("initial weights from ", path, ": ", loads.size(), " of ",
                                  trained_.size(), " tensors");
  if (!missing.empty()) {
    absl::StrAppend(&line, "; kept the file's own for ", absl::StrJoin(missing, ", "));
  }
  if (!unused.empty()) absl::StrAppend(&line, "; not in the model: ", absl::StrJoin(unused, ", "));
  return line;
}

}  // namespace spotps
