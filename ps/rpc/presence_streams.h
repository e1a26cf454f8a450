// PresenceStreams: the presence streams one service holds open for its
// clients (Coordinator.Attend, ParameterServer.Attend), so that a client
// killed mid-step shows as a broken stream at once, not after a timeout.
#ifndef SPOTPS_PS_RPC_PRESENCE_STREAMS_H_
#define SPOTPS_PS_RPC_PRESENCE_STREAMS_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/time/time.h"
#include "ps/rpc/update_signal.h"

namespace spotps {

// Owns the slots of the streams a service holds and their shutdown.
// Promises: at most kMaxStreams at once (each holds a server thread), a
// stream ends after kMaxAge (its client opens another), and Shutdown ends
// every stream within about 100 ms and admits no more. Thread-safe.
class PresenceStreams {
 public:
  static constexpr int kMaxStreams = 4096;
  static constexpr absl::Duration kMaxAge = absl::Minutes(5);

  enum class End {
    kBroken,    // The client went: cancelled, killed, or its connection broke.
    kShutDown,  // Shutdown: the server is going down.
    kExpired,   // kMaxAge passed.
  };

  // `holder` names the service in messages ("the coordinator"); `fallback`
  // says what stands in for a stream when there is no room for one.
  PresenceStreams(std::string holder, std::string fallback);

  // Takes a slot: OK, or the status to answer the stream with
  // (RESOURCE_EXHAUSTED when all are taken, UNAVAILABLE after Shutdown).
  grpc::Status Admit();
  void Release();

  // Holds an admitted stream until its client goes, Shutdown, or kMaxAge.
  // gRPC's sync API tells a handler of its client's end only when asked:
  // every 100 ms, so a killed client is noticed about that fast.
  End Hold(const grpc::ServerContext& context) const;
  // What the stream answers after it ended so.
  grpc::Status StatusFor(End end) const;

  // Ends every stream and admits no more.
  void Shutdown() { slots_.Shutdown(); }

 private:
  const std::string holder_;
  const std::string fallback_;
  // Nothing notifies it: waits on it end by their timeout or at Shutdown.
  UpdateSignal slots_{kMaxStreams};
};

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_PRESENCE_STREAMS_H_
