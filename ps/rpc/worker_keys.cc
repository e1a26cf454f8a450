#include "ps/rpc/worker_keys.h"

#include "absl/strings/str_cat.h"
#include "common/kernel_random.h"

namespace spotps {
namespace {

bool ConstantTimeEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::string WorkerKeys::Issue(uint64_t worker, std::string identity) {
  std::string key = KernelRandomBytes(kKeyBytes);
  absl::MutexLock lock(&mu_);
  entries_[worker] = Entry{key, std::move(identity)};
  return key;
}

absl::Status WorkerKeys::Check(uint64_t worker, absl::string_view key,
                               absl::string_view identity) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(worker);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("worker ", worker, " is not registered"));
  }
  if (key.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat("worker ", worker, ": the call carries no worker_key (from Register)"));
  }
  if (!ConstantTimeEqual(key, it->second.key)) {
    return absl::PermissionDeniedError(absl::StrCat("worker ", worker, ": wrong worker_key"));
  }
  if (identity != it->second.identity) {
    return absl::PermissionDeniedError(absl::StrCat(
        "worker ", worker, " registered as ",
        it->second.identity.empty() ? "an unauthenticated caller" : it->second.identity,
        "; this call comes from ", identity.empty() ? "an unauthenticated caller" : identity));
  }
  return absl::OkStatus();
}

void WorkerKeys::Forget(uint64_t worker) {
  absl::MutexLock lock(&mu_);
  entries_.erase(worker);
}

void WorkerKeys::Retain(const std::function<bool(uint64_t)>& live) {
  absl::MutexLock lock(&mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = live(it->first) ? std::next(it) : entries_.erase(it);
  }
}

size_t WorkerKeys::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace spotps
