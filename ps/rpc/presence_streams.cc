#include "ps/rpc/presence_streams.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace spotps {

PresenceStreams::PresenceStreams(std::string holder, std::string fallback)
    : holder_(std::move(holder)), fallback_(std::move(fallback)) {}

grpc::Status PresenceStreams::Admit() {
  if (slots_.Admit()) return grpc::Status::OK;
  if (slots_.shut_down()) return StatusFor(End::kShutDown);
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      absl::StrCat(holder_, " holds ", kMaxStreams,
                                   " presence streams, the most it takes: ", fallback_));
}

void PresenceStreams::Release() { slots_.Release(); }

PresenceStreams::End PresenceStreams::Hold(const grpc::ServerContext& context) const {
  const absl::Time end = absl::Now() + kMaxAge;
  while (true) {
    if (context.IsCancelled()) return End::kBroken;
    if (slots_.shut_down()) return End::kShutDown;
    if (absl::Now() >= end) return End::kExpired;
    slots_.WaitForChange(slots_.count(), absl::Now() + absl::Milliseconds(100));
  }
}

grpc::Status PresenceStreams::StatusFor(End end) const {
  switch (end) {
    case End::kBroken:
      return grpc::Status(grpc::StatusCode::CANCELLED, "presence stream broken");
    case End::kShutDown:
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat(holder_, " is shutting down"));
    case End::kExpired:
      break;
  }
  return grpc::Status::OK;
}

}  // namespace spotps
