#include "trainer/data/tokenizer.h"

#include <utility>

namespace spotps {

TokenizerIdentity IdentityOf(const Tokenizer& tokenizer, std::string model_file) {
  TokenizerIdentity identity;
  identity.kind = tokenizer.kind();
  identity.vocab_size = static_cast<uint32_t>(tokenizer.vocab_size());
  identity.vocabulary_hash = tokenizer.vocabulary_hash();
  identity.model_file = std::move(model_file);
  return identity;
}

}  // namespace spotps
