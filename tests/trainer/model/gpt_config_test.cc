#include "trainer/model/gpt_config.h"

#include <gtest/gtest.h>

namespace spotps {
namespace {

TEST(GptConfigTest, PresetsAreValidAndOrderedBySize) {
  int64_t previous_count = 0;
  for (absl::string_view name : GptPresetNames()) {
    absl::StatusOr<GptConfig> config = GptConfigFromPreset(name);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_TRUE(ValidateGptConfig(*config).ok()) << name;
    EXPECT_GT(GptParameterCount(*config), previous_count) << name;
    previous_count = GptParameterCount(*config);
  }
}

TEST(GptConfigTest, PresetParameterCountsMatchTheirNames) {
  const int64_t tiny = GptParameterCount(*GptConfigFromPreset("tiny"));
  const int64_t small = GptParameterCount(*GptConfigFromPreset("small"));
  const int64_t gpt2 = GptParameterCount(*GptConfigFromPreset("gpt2-124m"));
  EXPECT_GT(tiny, 600'000);
  EXPECT_LT(tiny, 1'500'000);
  EXPECT_GT(small, 8'000'000);
  EXPECT_LT(small, 13'000'000);
  // GPT-2 small's published size with the output head tied to wte.
  EXPECT_EQ(gpt2, 124'439'808);
}

TEST(GptConfigTest, UnknownPresetListsKnownOnes) {
  absl::StatusOr<GptConfig> config = GptConfigFromPreset("huge");
  ASSERT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("huge"), absl::string_view::npos);
  EXPECT_NE(config.status().message().find("tiny"), absl::string_view::npos);
}

TEST(GptConfigTest, RejectsWidthNotDivisibleByHeads) {
  GptConfig config;
  config.d_model = 130;
  config.n_head = 4;
  absl::Status status = ValidateGptConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("divisible"), absl::string_view::npos);
}

TEST(GptConfigTest, RejectsNonPositiveSizesAndBadDropout) {
  GptConfig no_layers;
  no_layers.n_layer = 0;
  EXPECT_NE(ValidateGptConfig(no_layers).message().find("n_layer"), absl::string_view::npos);

  GptConfig no_vocab;
  no_vocab.vocab_size = -1;
  EXPECT_EQ(ValidateGptConfig(no_vocab).code(), absl::StatusCode::kInvalidArgument);

  GptConfig dropout;
  dropout.dropout = 1.0;
  EXPECT_EQ(ValidateGptConfig(dropout).code(), absl::StatusCode::kInvalidArgument);

  EXPECT_TRUE(ValidateGptConfig(GptConfig{}).ok());
}

}  // namespace
}  // namespace spotps
