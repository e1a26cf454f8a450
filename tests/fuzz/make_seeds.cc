// Writes the seed corpus of the fuzz targets: one valid input each (and a
// BF16 variant for the codec), made by the real encoders, so the fuzzers
// start from inputs that pass every check and mutate from there.
//   spotps-fuzz-seeds tests/fuzz/corpus
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/int8_blocks.h"
#include "common/model_layout.h"
#include "common/partition_map.h"
#include "common/tensor_codec.h"
#include "ps/checkpoint/checkpoint_directory.h"
#include "ps/store/shard_store.h"
#include "spotps/v1/parameter_server.pb.h"

namespace spotps {
namespace {

void Put(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::filesystem::create_directories(dir);
  if (!WriteFileAtomically(absl::StrCat(dir, "/", name), bytes).ok()) std::exit(1);
}

std::string Floats(const std::vector<float>& values, v1::DType dtype) {
  std::string out;
  AppendEncoded(values.data(), static_cast<int64_t>(values.size()), dtype, &out);
  return out;
}

int Main(const std::string& root) {
  const std::vector<float> some = {0.5f, -1.25f, 3e-3f, 1e10f, -0.0f, 7.0f};
  Put(root + "/tensor_codec", "fp32", std::string(1, '\0') + Floats(some, v1::DTYPE_FP32));
  Put(root + "/tensor_codec", "bf16", std::string(1, '\1') + Floats(some, v1::DTYPE_BF16));
  // Bit 1 of the first byte picks the int8 decoder, the rest the offset (0).
  std::vector<float> many(300);
  for (size_t i = 0; i < many.size(); ++i) many[i] = some[i % some.size()] / (1 + i);
  std::string int8(Int8PayloadBytes(0, 300), '\0');
  EncodeInt8Blocks(many.data(), 0, 300, int8.data());
  Put(root + "/tensor_codec", "int8", std::string(1, '\2') + int8);

  const ModelLayout layout = *ModelLayout::Create({{"w", {128, 40}}, {"b", {40}}});
  Put(root + "/model_layout", "two_tensors",
      std::string(1, '\3') + layout.ToProto().SerializeAsString());

  ShardOptions options;
  options.optimizer.kind = OptimizerKind::kAdamW;
  std::unique_ptr<ShardStore> store = *ShardStore::Create(options);
  const PartitionMap map = *PartitionMap::Create(layout, 1);
  std::vector<std::string> bytes;
  std::vector<PayloadRange> ranges;
  v1::PushRequest push;
  push.set_push_id("seed-push");
  push.set_dtype(v1::DTYPE_FP32);
  for (const Partition& p : map.partitions()) {
    bytes.push_back(Floats(std::vector<float>(p.num_elements, 0.25f), v1::DTYPE_FP32));
  }
  for (size_t i = 0; i < map.partitions().size(); ++i) {
    const Partition& p = map.partitions()[i];
    ranges.push_back(PayloadRange{p.id, 0, bytes[i], 0});
    v1::PartitionCount* a = push.add_announced();
    a->set_partition_id(p.id);
    a->set_num_elements(p.num_elements);
    v1::PartitionChunk* c = push.add_chunks();
    c->set_partition_id(p.id);
    c->set_data(bytes[i]);
  }
  if (!store->Init(layout, ranges).ok()) return 1;
  Put(root + "/push", "whole_model", push.SerializeAsString());

  if (!store->Push("seed-push", v1::DTYPE_FP32, ranges).ok()) return 1;
  const std::string tmp = std::filesystem::temp_directory_path().string() + "/spotps-fuzz-seeds";
  CheckpointDirectory files = *CheckpointDirectory::Open(tmp, 0, 1);
  if (!files.Write(1, *store->ExportState(), "progress").ok()) return 1;
  Put(root + "/checkpoint_reader", "adamw_shard", *ReadFile(files.PathOf(1)));
  std::filesystem::remove_all(tmp);
  return 0;
}

}  // namespace
}  // namespace spotps

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: spotps-fuzz-seeds CORPUS_DIR\n");
    return 2;
  }
  return spotps::Main(argv[1]);
}
