#include "trainer/data/sentencepiece_helper.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/posix_file.h"

extern char** environ;

namespace spotps {
namespace {

using sentencepiece_protocol::Message;
using sentencepiece_protocol::MessageType;
using sentencepiece_protocol::PutString;
using sentencepiece_protocol::PutU32;

constexpr int kHelperSocket = 3;  // As sentencepiece_server_main.cc.
// Texts go to the helper in pieces of about this size, cut after a newline.
constexpr size_t kEncodeChunkBytes = size_t{16} << 20;

std::string HelperPath() {
  if (const char* path = std::getenv("SPOTPS_SENTENCEPIECE_HELPER");
      path != nullptr && *path != '\0') {
    return path;
  }
  char executable[4096];
  const ssize_t length = readlink("/proc/self/exe", executable, sizeof(executable) - 1);
  if (length <= 0) return kSentencePieceHelperName;
  return absl::StrCat(DirectoryOf(std::string(executable, length)), "/",
                      kSentencePieceHelperName);
}

// The first kEncodeChunkBytes or so of `text`, ending after a newline
// where there is one; the helper encodes line by line, so cutting there
// changes no id.
absl::string_view NextChunk(absl::string_view text) {
  if (text.size() <= kEncodeChunkBytes) return text;
  const size_t newline = text.rfind('\n', kEncodeChunkBytes);
  if (newline != absl::string_view::npos) return text.substr(0, newline + 1);
  const size_t next_newline = text.find('\n', kEncodeChunkBytes);
  return next_newline == absl::string_view::npos ? text : text.substr(0, next_newline + 1);
}

}  // namespace

absl::StatusOr<SentencePieceHelper*> SentencePieceHelper::Get() {
  static const absl::StatusOr<SentencePieceHelper*>* const helper =
      new absl::StatusOr<SentencePieceHelper*>(Start());
  return *helper;
}

absl::StatusOr<SentencePieceHelper*> SentencePieceHelper::Start() {
  const std::string path = HelperPath();
  if (access(path.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "SentencePiece needs its helper program ", path, ", built and installed beside the "
        "spotps binaries ($SPOTPS_SENTENCEPIECE_HELPER names another): ", std::strerror(errno)));
  }
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    return ErrnoError("socketpair for", path);
  }
  // Moved above kHelperSocket: dup2 onto the same number would leave it
  // close-on-exec.
  const int child_end = fcntl(sockets[1], F_DUPFD_CLOEXEC, kHelperSocket + 1);
  close(sockets[1]);
  if (child_end < 0) {
    close(sockets[0]);
    return ErrnoError("fcntl for", path);
  }
  sockets[1] = child_end;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sockets[1], kHelperSocket);
  char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
  pid_t pid = 0;
  const int error = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(sockets[1]);
  if (error != 0) {
    close(sockets[0]);
    return absl::FailedPreconditionError(
        absl::StrCat("starting ", path, " failed: ", std::strerror(error)));
  }
  return new SentencePieceHelper(sockets[0], pid);
}

absl::Status SentencePieceHelper::HelperGone() {
  gone_ = true;
  int status = 0;
  std::string how = "closed its socket";
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    how = WIFSIGNALED(status) ? absl::StrCat("was killed by signal ", WTERMSIG(status))
                              : absl::StrCat("exited with status ", WEXITSTATUS(status));
  }
  return absl::InternalError(
      absl::StrCat(kSentencePieceHelperName, " (pid ", pid_, ") ", how));
}

absl::StatusOr<std::string> SentencePieceHelper::Call(MessageType type,
                                                      absl::string_view payload) {
  absl::MutexLock lock(&mutex_);
  if (gone_) {
    return absl::InternalError(absl::StrCat(kSentencePieceHelperName, " is gone"));
  }
  Message reply;
  if (!sentencepiece_protocol::WriteMessage(socket_, type, {payload.data(), payload.size()}) ||
      !sentencepiece_protocol::ReadMessage(socket_, &reply)) {
    return HelperGone();
  }
  if (reply.type == MessageType::kError) return absl::InvalidArgumentError(reply.payload);
  if (reply.type != MessageType::kOk) return HelperGone();
  return std::move(reply.payload);
}

absl::StatusOr<std::string> SentencePieceHelper::Train(
    absl::Span<const absl::string_view> sentences, int vocab_size, absl::string_view model_type) {
  std::string request;
  PutU32(&request, static_cast<uint32_t>(vocab_size));
  PutString(&request, {model_type.data(), model_type.size()});
  PutU32(&request, static_cast<uint32_t>(sentences.size()));
  for (absl::string_view sentence : sentences) {
    PutString(&request, {sentence.data(), sentence.size()});
  }
  return Call(MessageType::kTrain, request);
}

absl::StatusOr<SentencePieceHelper::LoadedModel> SentencePieceHelper::Load(
    absl::string_view serialized_model) {
  absl::StatusOr<std::string> reply = Call(MessageType::kLoad, serialized_model);
  if (!reply.ok()) return reply.status();
  sentencepiece_protocol::PayloadReader fields(*reply);
  LoadedModel model;
  uint32_t values[4];
  if (!fields.U32(&model.handle) || !fields.U32(&values[0]) || !fields.U32(&values[1]) ||
      !fields.U32(&values[2]) || !fields.U32(&values[3])) {
    return absl::InternalError("a malformed reply to loading a SentencePiece model");
  }
  model.vocab_size = static_cast<int>(values[0]);
  model.pad_id = static_cast<int>(values[1]);
  model.eos_id = static_cast<int>(values[2]);
  model.unk_id = static_cast<int>(values[3]);
  return model;
}

absl::Status SentencePieceHelper::Encode(uint32_t handle, absl::string_view text,
                                         std::vector<uint32_t>& ids) {
  while (!text.empty()) {
    const absl::string_view chunk = NextChunk(text);
    std::string request;
    PutU32(&request, handle);
    request.append(chunk.data(), chunk.size());
    absl::StatusOr<std::string> reply = Call(MessageType::kEncode, request);
    if (!reply.ok()) return reply.status();
    sentencepiece_protocol::PayloadReader reader(*reply);
    uint32_t id = 0;
    while (reader.U32(&id)) ids.push_back(id);
    text.remove_prefix(chunk.size());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SentencePieceHelper::Decode(uint32_t handle,
                                                        absl::Span<const int64_t> ids) {
  std::string request;
  PutU32(&request, handle);
  for (int64_t id : ids) PutU32(&request, static_cast<uint32_t>(id));
  return Call(MessageType::kDecode, request);
}

void SentencePieceHelper::Release(uint32_t handle) {
  std::string request;
  PutU32(&request, handle);
  Call(MessageType::kRelease, request).IgnoreError();
}

}  // namespace spotps
