// Finds and loads libspotps_sentencepiece.so (see sentencepiece_plugin.h)
// once per process, keeping its symbols, and libsentencepiece's, out of
// everyone else's way.

#ifndef SPOTPS_TRAINER_DATA_SENTENCEPIECE_PLUGIN_LOADER_H_
#define SPOTPS_TRAINER_DATA_SENTENCEPIECE_PLUGIN_LOADER_H_

#include "absl/status/statusor.h"
#include "trainer/data/sentencepiece_plugin.h"

namespace spotps {

// The plug-in, loaded on first use from $SPOTPS_SENTENCEPIECE_PLUGIN if set,
// else beside the running executable, else from ../lib/spotps/ next to it
// (the installed layout). FailedPrecondition naming the places tried and
// the loader's error if it cannot be loaded. Thread-safe; the plug-in stays
// loaded until exit.
absl::StatusOr<const sentencepiece_plugin::Plugin*> LoadSentencePiecePlugin();

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_SENTENCEPIECE_PLUGIN_LOADER_H_
