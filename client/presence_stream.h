// Presence streams: a server-streaming call a client holds open while it
// lives (Coordinator.Attend, ParameterServer.Attend), so that the server
// sees a killed client at once, from its broken connection, instead of
// after a lease or a silence runs out.
#ifndef SPOTPS_CLIENT_PRESENCE_STREAM_H_
#define SPOTPS_CLIENT_PRESENCE_STREAM_H_

#include <functional>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace spotps {

// One open presence stream. Thread-safe: Cancel may come from any thread
// while another waits.
class PresenceStream {
 public:
  virtual ~PresenceStream() = default;
  // Blocks until the stream ends and returns how it ended (CANCELLED after
  // Cancel, OK when the server ended it after its time).
  virtual absl::Status Wait() = 0;
  // Ends the stream from this side.
  virtual void Cancel() = 0;
};

// Owns a thread that keeps one presence stream open until Stop: it opens
// the next one at once when the server ends one, after a jittered backoff
// (100 ms doubling to 5 s) when one fails, and gives up on UNIMPLEMENTED
// (a server from before presence streams). Thread-safe.
class PresenceKeeper {
 public:
  using Open = std::function<std::unique_ptr<PresenceStream>()>;
  // Starts the thread; `open` is called on it for every stream.
  explicit PresenceKeeper(Open open);
  ~PresenceKeeper() { Stop(); }
  PresenceKeeper(const PresenceKeeper&) = delete;
  PresenceKeeper& operator=(const PresenceKeeper&) = delete;

  // Ends the open stream and opens the next at once (`open` speaks for
  // what changed since: a new worker id).
  void Reopen();
  // Ends the open stream and the thread; idempotent.
  void Stop();

 private:
  void Keep();

  const Open open_;
  absl::Mutex mu_;
  std::unique_ptr<PresenceStream> stream_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool reopen_ ABSL_GUARDED_BY(mu_) = false;  // The open stream ends by Reopen.
  std::thread thread_;
};

}  // namespace spotps

#endif  // SPOTPS_CLIENT_PRESENCE_STREAM_H_
