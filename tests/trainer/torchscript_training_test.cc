// Training TorchScript files through the shards, as a user brings them:
// a GPT-2-style decoder, a Llama-style decoder (RMSNorm, rotary embeddings
// as buffers, SwiGLU, untied head) and a BERT-style classifier, exported at
// test time, each trained by 2 trainer processes against 2 shards: every
// unit committed once and the validation loss (and, for the classifier,
// accuracy) better than the exported weights'. The GPT job also loses a
// trainer to kill -9 and gains a replacement; the Llama's weights go
// through spotps-generate, spotps-ctl export/import and --init_from; the
// classifier trains in sync mode.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "client/safetensors_file.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/log_fields.h"
#include "tests/support/training_job.h"
#include "trainer/data/training_data.h"
#include "trainer/model/parameter_binding.h"
#include "trainer/model/torchscript_model.h"

namespace spotps {
namespace {

struct JobResult {
  uint64_t committed = 0, duplicated = 0, units = 0;
  Evaluation start, end;
};

class TorchScriptTrainingTest : public ::testing::Test {
 protected:
  // Validation of `model`'s file weights, or (with `cluster`) of the
  // cluster's current ones, on `data`.
  Evaluation Evaluated(const std::string& model, const std::string& data, Cluster* cluster) {
    auto loaded = TorchScriptModel::Load(model);
    auto opened = OpenTrainingData(data, TokenFileFormat::kSpotps);
    EXPECT_TRUE(loaded.ok() && opened.ok());
    if (!loaded.ok() || !opened.ok()) return {};
    if (cluster != nullptr) {
      auto binding = ParameterBinding::Create(**loaded);
      WeightSnapshot w;
      EXPECT_TRUE(cluster->Pull(v1::DTYPE_FP32, &w).ok());
      binding->LoadWeights(w.values);
    }
    const int64_t seq_len = (*opened)->fixed_seq_len() > 0 ? (*opened)->fixed_seq_len() : 64;
    auto e = Evaluate(**loaded, **opened, 8, seq_len, 16, ComputeDType::kFP32);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.value_or(Evaluation{});
  }

  // A 2-shard job of `model` on `data`, 2 trainers to the end; with `kill`,
  // trainer 1 dies by SIGKILL once a third of the units are committed and
  // a third trainer takes its place.
  JobResult Run(const std::string& name, const std::string& model, const std::string& data,
                int units, bool kill,
                const std::function<void(testing::TrainingJob&)>& when_done = nullptr,
                const std::string& consistency = "async") {
    testing::JobOptions options;
    options.consistency = consistency;
    options.epochs = 2;
    options.units_per_epoch = units;
    options.model = model;
    testing::TrainingJob job(dir_.path() + "/" + name, data, options);
    JobResult r;
    r.start = Evaluated(model, data, nullptr);
    EXPECT_TRUE(job.StartShards(/*durable=*/false).ok());
    EXPECT_TRUE(job.StartTrainer().ok());
    EXPECT_TRUE(job.StartTrainer().ok());
    if (kill) {
      const absl::Time give_up = absl::Now() + absl::Seconds(120);
      while (absl::Now() < give_up) {
        auto p = job.Progress();
        if (p.ok() && p->epochs(0).committed() >= static_cast<uint64_t>(units) / 3) break;
        absl::SleepFor(absl::Milliseconds(100));
      }
      job.trainers()[1]->Signal(SIGKILL);
      EXPECT_TRUE(job.StartTrainer().ok());
    }
    auto done = job.WaitDone(absl::Seconds(300));
    EXPECT_TRUE(done.ok()) << done.status() << testing::LogTails(job.dir());
    if (done.ok()) {
      for (const v1::EpochProgress& e : done->epochs()) {
        r.committed += e.committed();
        r.duplicated += e.duplicated();
        r.units += e.units();
      }
    }
    auto cluster = Cluster::Connect(job.shards().addresses());
    EXPECT_TRUE(cluster.ok() && (*cluster)->FetchLayout().ok());
    r.end = Evaluated(model, data, cluster->get());
    if (when_done) when_done(job);
    EXPECT_EQ(job.Shutdown(), 0) << testing::LogTails(job.dir());
    std::cout << name << ": units=" << r.units << " committed=" << r.committed
              << " duplicated=" << r.duplicated << " val_loss " << r.start.loss << " -> "
              << r.end.loss << " accuracy " << r.start.accuracy << " -> " << r.end.accuracy
              << std::endl;
    return r;
  }

  testing::TempDir dir_;
};

TEST_F(TorchScriptTrainingTest, GptDecoderLearnsThroughTwoShardsAndSurvivesAKill) {
  auto model = testing::ExportModel(dir_.path(), "gpt", {"--arch=gpt2"});
  ASSERT_TRUE(model.ok()) << model.status();
  auto tokens = testing::MakeTokenFile(dir_.path(), 5000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  const JobResult r = Run("gpt", *model, *tokens, 40, /*kill=*/true);
  EXPECT_EQ(r.committed, r.units);
  EXPECT_LT(r.end.loss, 0.7 * r.start.loss);
}

// Runs a binary to its end; its exit code and output.
std::pair<int, std::string> RunBinary(const std::vector<std::string>& argv, const std::string& log) {
  absl::StatusOr<testing::ExitResult> run = testing::RunToExit(argv, log, absl::Seconds(120));
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? std::pair(run->exit_code, run->output) : std::pair(-1, std::string());
}

// The trained Llama's weights as a user moves them: sampled from the shards
// with spotps-generate, exported by spotps-ctl under the module's own
// names, imported into fresh shards bit for bit, and loaded by a trainer
// with --init_from.
void MoveLlamaWeights(testing::TrainingJob& job, const std::string& model,
                      const std::string& tokens, const std::string& dir) {
  const std::string ps = "--ps=" + job.shards().addresses();
  auto [gen, gen_out] = RunBinary({testing::BinaryPath("spotps-generate"), ps, "--model=" + model,
                                   "--data=" + tokens, "--tokens=12", "--threads=1",
                                   "--seq_len=64"},
                                  dir + "/generate.log");
  EXPECT_EQ(gen, 0) << gen_out;
  EXPECT_NE(gen_out.find("eval: val_loss="), std::string::npos) << gen_out;
  EXPECT_NE(gen_out.find("--- In the beginning"), std::string::npos) << gen_out;
  const std::string file = dir + "/llama.safetensors";
  auto [exported, export_out] = RunBinary(
      {testing::BinaryPath("spotps-ctl"), ps, "export", "--out=" + file}, dir + "/export.log");
  ASSERT_EQ(exported, 0) << export_out;
  auto contents = ReadSafetensorsFile(file);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_NE(contents->Find("layers.0.attention.wq.weight"), nullptr);
  EXPECT_EQ(contents->metadata.at("spotps.names"), "module");

  std::filesystem::create_directories(dir + "/fresh");
  std::filesystem::create_directories(dir + "/init_from");
  auto fresh = testing::LocalShardCluster::Start(1, {"--optimizer=sgd"}, dir + "/fresh");
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  auto [imported, import_out] =
      RunBinary({testing::BinaryPath("spotps-ctl"), "--ps=" + (*fresh)->addresses(), "import",
                 "--in=" + file},
                dir + "/import.log");
  ASSERT_EQ(imported, 0) << import_out;
  auto trained = Cluster::Connect(job.shards().addresses());
  auto copy = Cluster::Connect((*fresh)->addresses());
  ASSERT_TRUE((*trained)->FetchLayout().ok() && (*copy)->FetchLayout().ok());
  EXPECT_EQ((*copy)->layout().fingerprint(), (*trained)->layout().fingerprint());
  WeightSnapshot a, b;
  ASSERT_TRUE((*trained)->Pull(v1::DTYPE_FP32, &a).ok() && (*copy)->Pull(v1::DTYPE_FP32, &b).ok());
  EXPECT_EQ(a.values, b.values);

  auto other = testing::LocalShardCluster::Start(1, {"--optimizer=sgd", "--lr=1e-30"},
                                                 dir + "/init_from");
  ASSERT_TRUE(other.ok()) << other.status();
  auto [init, init_out] = RunBinary(
      {testing::BinaryPath("spotps-trainer"), "--ps=" + (*other)->addresses(), "--model=" + model,
       "--data=" + tokens, "--init_from=" + file, "--coordinator=none", "--steps=1",
       "--threads=1", "--eval_batches=0", "--seq_len=64"},
      dir + "/init_from.log");
  EXPECT_EQ(init, 0) << init_out;
  auto seen = absl::StrCat(contents->tensors.size(), " of ", contents->tensors.size(), " tensors");
  EXPECT_NE(init_out.find(seen), std::string::npos) << init_out;
  auto started = Cluster::Connect((*other)->addresses());
  ASSERT_TRUE((*started)->FetchLayout().ok());
  WeightSnapshot c;
  ASSERT_TRUE((*started)->Pull(v1::DTYPE_FP32, &c).ok());
  EXPECT_EQ(c.values, b.values);  // SGD at 1e-30 moved nothing.
}

TEST_F(TorchScriptTrainingTest, LlamaDecoderLearnsThroughTwoShardsAndItsWeightsTravel) {
  auto model = testing::ExportModel(dir_.path(), "llama", {"--arch=llama"});
  ASSERT_TRUE(model.ok()) << model.status();
  auto tokens = testing::MakeTokenFile(dir_.path(), 5000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  const std::string dir = dir_.path();
  const JobResult r =
      Run("llama", *model, *tokens, 40, /*kill=*/false, [&](testing::TrainingJob& job) {
        MoveLlamaWeights(job, *model, *tokens, dir);
      });
  EXPECT_EQ(r.committed, r.units);
  EXPECT_EQ(r.duplicated, 0u);
  EXPECT_LT(r.end.loss, 0.7 * r.start.loss);
}

TEST_F(TorchScriptTrainingTest, BertClassifierLearnsThroughTwoShards) {
  auto model =
      testing::ExportModel(dir_.path(), "bert", {"--arch=bert", "--num_classes=3", "--n_layer=2"});
  ASSERT_TRUE(model.ok()) << model.status();
  auto labeled = testing::MakeLabeledFile(dir_.path(), 600, 48);
  ASSERT_TRUE(labeled.ok()) << labeled.status();
  // In synchronous rounds, as the other jobs train in the default mode.
  const JobResult r = Run("bert", *model, *labeled, 60, /*kill=*/false, nullptr, "sync");
  EXPECT_EQ(r.committed, r.units);
  EXPECT_EQ(r.duplicated, 0u);
  EXPECT_LT(r.end.loss, 0.8 * r.start.loss);
  EXPECT_GT(r.end.accuracy, 0.6);  // Three balanced labels: chance is about a third.
}

}  // namespace
}  // namespace spotps
