// TorchScript models a user brings (--model=FILE.pt), exported at test time
// by tools/models/export_model.py with Debian's torch: the GPT-2-style
// export computes the built-in GPT's loss on the same weights, and every
// file that breaks the contract is refused with its rule, exit 2, before
// the trainer contacts anything, and changes no shard.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/counting_listener.h"
#include "tests/support/generated_corpus.h"
#include "trainer/data/training_data.h"
#include "trainer/model/builtin_model.h"
#include "trainer/model/parameter_binding.h"
#include "trainer/model/torchscript_model.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;

// The built-in small preset's sizes, as export_model.py flags.
std::vector<std::string> SmallFlags() {
  const GptConfig c = *GptConfigFromPreset("small");
  return {"--arch=gpt2",
          absl::StrCat("--vocab_size=", c.vocab_size),
          absl::StrCat("--context_len=", c.context_len),
          absl::StrCat("--n_layer=", c.n_layer),
          absl::StrCat("--n_head=", c.n_head),
          absl::StrCat("--d_model=", c.d_model)};
}

TEST(TorchScriptModelTest, GptExportComputesTheBuiltInModelsLossOnItsWeights) {
  testing::TempDir dir;
  absl::StatusOr<std::string> path = testing::ExportModel(dir.path(), "gpt", SmallFlags());
  ASSERT_TRUE(path.ok()) << path.status();
  auto script = TorchScriptModel::Load(*path);
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_EQ((*script)->task(), Task::kLanguageModel);
  EXPECT_EQ((*script)->limits().context_len, GptConfigFromPreset("small")->context_len);
  auto builtin = BuiltinGptModel::Create(*GptConfigFromPreset("small"), 7, "small");
  ASSERT_TRUE(builtin.ok());
  // Same names, shapes and order: one layout, so one job.
  auto from = ParameterBinding::Create(**builtin);
  auto to = ParameterBinding::Create(**script);
  ASSERT_TRUE(from.ok() && to.ok());
  ASSERT_TRUE(to->CheckSameModel(from->layout()).ok());
  to->LoadWeights(from->FlattenWeights());

  auto tokens = testing::MakeTokenFile(dir.path(), 3000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  auto data = OpenTrainingData(*tokens, TokenFileFormat::kSpotps);
  ASSERT_TRUE(data.ok());
  auto batch = (*data)->TrainBatch(1, 3, 4, 128);
  ASSERT_TRUE(batch.ok());
  for (ComputeDType dtype : {ComputeDType::kFP32, ComputeDType::kBF16}) {
    const double want = ComputeLoss(**builtin, *batch, dtype)->item<double>();
    const double got = ComputeLoss(**script, *batch, dtype)->item<double>();
    // FP32: the same function up to summation order. BF16: the export's
    // LibTorch GELU and attention round differently from the built-in's
    // oneDNN GELU and blocked attention.
    const double tolerance = dtype == ComputeDType::kFP32 ? 1e-5 : 2e-2;
    EXPECT_NEAR(got, want, tolerance * want) << ComputeDTypeName(dtype);
  }
}

class BadModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokens = testing::MakeTokenFile(dir_.path(), 2000);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    tokens_ = *tokens;
    auto good = testing::ExportModel(dir_.path(), "good", {"--arch=gpt2"});
    ASSERT_TRUE(good.ok()) << good.status();
    good_ = *good;
    auto child = ChildProcess::Start(
        {"/usr/bin/python3", SPOTPS_SOURCE_DIR "/tests/trainer/model/write_bad_models.py",
         dir_.path(), good_},
        dir_.path() + "/bad.log");
    ASSERT_TRUE(child.ok());
    ASSERT_EQ((*child)->Wait(absl::Seconds(120)).value_or(-1), 0)
        << ReadFile(dir_.path() + "/bad.log").value_or("");
  }

  // Runs spotps-trainer on `model` for one step; its exit code and output.
  std::pair<int, std::string> Train(const std::string& ps, const std::string& model,
                                    const std::vector<std::string>& extra = {}) {
    const std::string log = absl::StrCat(dir_.path(), "/train", runs_++, ".log");
    std::vector<std::string> argv = {BinaryPath("spotps-trainer"), "--ps=" + ps,
                                     "--model=" + model, "--data=" + tokens_,
                                     "--coordinator=none", "--steps=1", "--threads=1",
                                     "--batch=2", "--seq_len=32", "--eval_batches=0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto child = ChildProcess::Start(argv, log);
    EXPECT_TRUE(child.ok());
    const int code = child.ok() ? (*child)->Wait(absl::Seconds(120)).value_or(-1) : -1;
    return {code, ReadFile(log).value_or("")};
  }

  testing::TempDir dir_;
  std::string tokens_, good_;
  int runs_ = 0;
};

TEST_F(BadModelTest, EveryBrokenFileIsRefusedWithItsRuleBeforeAnyConnection) {
  testing::CountingListener shard;
  const std::string ps = absl::StrCat("127.0.0.1:", shard.port());
  auto tiny_vocab = testing::ExportModel(dir_.path(), "tiny_vocab",
                                         {"--arch=gpt2", "--vocab_size=64"});
  ASSERT_TRUE(tiny_vocab.ok()) << tiny_vocab.status();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"state_dict.pt", "a torch.save() pickle"},
      {"pickled.pt", "a pickle from torch.save()"},
      {"truncated.pt", "truncated or damaged"},
      {"random.pt", "not a TorchScript file"},
      {"signature.pt", "forward must be forward(input_ids)"},
      {"rank.pt", "must return logits [B, T, V]"},
      {"nan.pt", "logits hold NaN or Inf"},
      {"bf16.pt", "is BFloat16"},
      {"frozen.pt", "no parameter that requires grad"},
      {"missing.pt", "no such file"},
      {*tiny_vocab, "vocabulary has 64 entries"},
  };
  for (const auto& [file, rule] : cases) {
    const std::string path = absl::StrContains(file, '/') ? file : dir_.path() + "/" + file;
    const auto [code, output] = Train(ps, path);
    EXPECT_EQ(code, 2) << file << "\n" << output;
    EXPECT_TRUE(absl::StrContains(output, rule)) << file << ": wanted '" << rule << "'\n"
                                                 << output;
    EXPECT_TRUE(absl::StrContains(output, path)) << "the message names the file\n" << output;
  }
  EXPECT_EQ(shard.Accepted(), 0);
}

TEST_F(BadModelTest, AModelOtherThanTheJobsIsRefusedAndChangesNothing) {
  auto shards = testing::LocalShardCluster::Start(2, {"--optimizer=sgd", "--lr=0.1"},
                                                  dir_.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  const auto [first, first_log] = Train((*shards)->addresses(), good_);
  ASSERT_EQ(first, 0) << first_log;
  auto cluster = Cluster::Connect((*shards)->addresses());
  ASSERT_TRUE(cluster.ok() && (*cluster)->FetchLayout().ok());
  WeightSnapshot before;
  ASSERT_TRUE((*cluster)->Pull(v1::DTYPE_FP32, &before).ok());

  auto llama = testing::ExportModel(dir_.path(), "llama", {"--arch=llama"});
  ASSERT_TRUE(llama.ok()) << llama.status();
  const auto [code, output] = Train((*shards)->addresses(), *llama);
  EXPECT_EQ(code, 2) << output;
  EXPECT_TRUE(absl::StrContains(output, "the cluster trains a different model: its tensor 0 is "
                                        "'wte.weight'"))
      << output;
  EXPECT_TRUE(absl::StrContains(output, "'tok_embeddings.weight'")) << output;
  WeightSnapshot after;
  ASSERT_TRUE((*cluster)->Pull(v1::DTYPE_FP32, &after).ok());
  EXPECT_EQ(after.values, before.values);
  EXPECT_EQ(after.versions, before.versions);
}

}  // namespace
}  // namespace spotps
