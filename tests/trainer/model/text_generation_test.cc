#include "trainer/model/text_generation.h"

#include <gtest/gtest.h>

#include <vector>

#include "trainer/model/builtin_model.h"

namespace spotps {
namespace {

BuiltinGptModel TinyModel() { return BuiltinGptModel(GptModel(*GptConfigFromPreset("tiny"), 5), "tiny"); }

std::vector<int64_t> GenerateOrDie(TrainableModel& model, const std::vector<int64_t>& prompt,
                                   const GenerationOptions& options) {
  absl::StatusOr<std::vector<int64_t>> tokens = Generate(model, prompt, options);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  return tokens.value_or(std::vector<int64_t>{});
}

TEST(TextGenerationTest, SameSeedSamplesSameTokens) {
  BuiltinGptModel model = TinyModel();
  GenerationOptions options;
  options.max_new_tokens = 40;
  options.seed = 9;
  const std::vector<int64_t> prompt = {'I', 'n', ' '};
  const std::vector<int64_t> first = GenerateOrDie(model, prompt, options);
  const std::vector<int64_t> again = GenerateOrDie(model, prompt, options);
  options.seed = 10;
  const std::vector<int64_t> other = GenerateOrDie(model, prompt, options);
  EXPECT_EQ(first.size(), 40u);
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
  for (int64_t token : first) {
    EXPECT_GE(token, 0);
    EXPECT_LT(token, 256);
  }
}

TEST(TextGenerationTest, GreedyIgnoresSeedAndTopKLimitsChoices) {
  BuiltinGptModel model = TinyModel();
  GenerationOptions greedy;
  greedy.max_new_tokens = 10;
  greedy.temperature = 0.0;
  greedy.seed = 1;
  const std::vector<int64_t> prompt = {'a'};
  const std::vector<int64_t> first = GenerateOrDie(model, prompt, greedy);
  greedy.seed = 2;
  EXPECT_EQ(GenerateOrDie(model, prompt, greedy), first);

  // With top_k = 1 sampling can only pick the argmax: the greedy answer.
  GenerationOptions top1;
  top1.max_new_tokens = 10;
  top1.top_k = 1;
  top1.seed = 3;
  EXPECT_EQ(GenerateOrDie(model, prompt, top1), first);
}

TEST(TextGenerationTest, PromptLongerThanContextIsWindowed) {
  BuiltinGptModel model = TinyModel();
  GenerationOptions options;
  options.max_new_tokens = 3;
  options.dtype = ComputeDType::kBF16;
  const std::vector<int64_t> long_prompt(300, 'x');
  EXPECT_EQ(GenerateOrDie(model, long_prompt, options).size(), 3u);
}

TEST(TextGenerationTest, RestoresTrainingModeAndRejectsBadPrompts) {
  BuiltinGptModel model = TinyModel();
  model.SetTraining(true);
  GenerationOptions options;
  options.max_new_tokens = 2;
  GenerateOrDie(model, {1, 2}, options);
  EXPECT_TRUE(model.training());

  EXPECT_EQ(Generate(model, {}, options).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<int64_t> out_of_vocab = {256};
  EXPECT_EQ(Generate(model, out_of_vocab, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spotps
