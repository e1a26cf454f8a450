#include "trainer/data/sentencepiece_plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/posix_file.h"

namespace spotps {
namespace {

using sentencepiece_plugin::Plugin;

std::vector<std::string> CandidatePaths() {
  if (const char* path = std::getenv("SPOTPS_SENTENCEPIECE_PLUGIN");
      path != nullptr && *path != '\0') {
    return {path};
  }
  std::vector<std::string> paths;
  char executable[4096];
  const ssize_t length = readlink("/proc/self/exe", executable, sizeof(executable) - 1);
  if (length > 0) {
    const std::string directory = DirectoryOf(std::string(executable, length));
    paths.push_back(absl::StrCat(directory, "/", sentencepiece_plugin::kPluginFileName));
    paths.push_back(
        absl::StrCat(directory, "/../lib/spotps/", sentencepiece_plugin::kPluginFileName));
  }
  return paths;
}

// RTLD_LOCAL keeps the plug-in's symbols (and libsentencepiece's
// protobuf-lite) out of the global scope, so they replace no one's;
// RTLD_DEEPBIND makes libsentencepiece bind to its own protobuf-lite rather
// than to the process's libprotobuf, a different version.
absl::StatusOr<const Plugin*> Load() {
  std::vector<std::string> errors;
  const std::vector<std::string> paths = CandidatePaths();
  for (const std::string& path : paths) {
    if (access(path.c_str(), F_OK) != 0) {
      errors.push_back(absl::StrCat(path, ": not there"));
      continue;
    }
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (library == nullptr) {
      errors.push_back(dlerror());
      continue;
    }
    auto* entry = reinterpret_cast<const Plugin* (*)()>(
        dlsym(library, sentencepiece_plugin::kEntryPoint));
    if (entry == nullptr) {
      errors.push_back(absl::StrCat(path, ": no ", sentencepiece_plugin::kEntryPoint));
      continue;
    }
    return entry();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot load SentencePiece support (", sentencepiece_plugin::kPluginFileName,
      ", built and installed with spotps; $SPOTPS_SENTENCEPIECE_PLUGIN names another): ",
      absl::StrJoin(errors, "; ")));
}

}  // namespace

absl::StatusOr<const Plugin*> LoadSentencePiecePlugin() {
  static const absl::StatusOr<const Plugin*>* const plugin =
      new absl::StatusOr<const Plugin*>(Load());
  return *plugin;
}

}  // namespace spotps
