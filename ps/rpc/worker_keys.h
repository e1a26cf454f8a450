// WorkerKeys: the secret each registered trainer proves itself with.
//
// Worker ids are small sequential numbers that Progress and the status page
// show to every reader, so an id alone must not let a caller heartbeat,
// commit, release or deregister as that worker. Register hands out a random
// 128-bit key with the id; every later call of that worker carries it
// (the client library does this itself). Where tokens or client
// certificates are in use, the key is also bound to the identity that
// registered: another identity's call is refused even with the right key.
#ifndef SPOTPS_PS_RPC_WORKER_KEYS_H_
#define SPOTPS_PS_RPC_WORKER_KEYS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace spotps {

// Owns one (key, identity) per worker that registered and was not
// forgotten. Thread-safe. Promises: keys come from the kernel's CSPRNG and
// are compared in constant time; a refused check changes nothing.
class WorkerKeys {
 public:
  static constexpr size_t kKeyBytes = 16;

  // A fresh key for `worker`, bound to `identity` ("" where callers are not
  // authenticated).
  std::string Issue(uint64_t worker, std::string identity);
  // OK when `key` is `worker`'s and `identity` the one it registered with.
  // NOT_FOUND for a worker without a key (never registered here, or this
  // shard restarted: register again); PERMISSION_DENIED otherwise.
  absl::Status Check(uint64_t worker, absl::string_view key, absl::string_view identity) const;
  void Forget(uint64_t worker);
  // Forgets every worker for which `live` is false.
  void Retain(const std::function<bool(uint64_t)>& live);
  size_t size() const;

 private:
  struct Entry {
    std::string key;
    std::string identity;
  };
  mutable absl::Mutex mu_;
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_WORKER_KEYS_H_
