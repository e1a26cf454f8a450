// LeaseTable: the trainers that are alive, as far as the coordinator knows.
#ifndef SPOTPS_PS_COORDINATION_LEASE_TABLE_H_
#define SPOTPS_PS_COORDINATION_LEASE_TABLE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace spotps {

// Owns one lease per registered worker. Promises: ids are never reused; a
// worker is live from Register until it deregisters or goes `ttl` without
// a heartbeat (or past a Cut), and an expired worker stays gone (it must
// register anew).
// Not thread-safe: the Coordinator serializes access.
class LeaseTable {
 public:
  struct Member {
    uint64_t id = 0;
    std::string name;
    absl::Time last_heartbeat;
    uint64_t units_committed = 0;
    uint64_t clock = 0;  // Units granted: a worker's progress for SSP.
    uint64_t units_granted = 0;    // To this registration (clock starts at the slowest's).
    uint64_t tokens_per_unit = 0;  // As the worker said at registration; 0: unknown.
    int presence_streams = 0;      // Open Attend streams (Coordinator::OpenPresence).
    // An earlier end of the lease, set by Cut and lifted by Renew.
    absl::Time cut_to = absl::InfiniteFuture();
  };

  explicit LeaseTable(absl::Duration ttl) : ttl_(ttl) {}

  uint64_t Register(const std::string& name, uint64_t tokens_per_unit, absl::Time now);
  // False if the worker is unknown or its lease already expired.
  bool Renew(uint64_t id, absl::Time now);
  // Ends the lease at `end` at the latest, unless it is renewed before;
  // false if the worker is unknown.
  bool Cut(uint64_t id, absl::Time end);
  bool Remove(uint64_t id);
  // Drops every lease older than ttl and returns the dropped ids.
  std::vector<uint64_t> Expire(absl::Time now);

  bool IsLive(uint64_t id) const { return members_.count(id) != 0; }
  void CountCommit(uint64_t id);
  // The clock of the slowest live worker (0 when there is none).
  uint64_t MinClock() const;
  Member* Find(uint64_t id);
  const std::map<uint64_t, Member>& members() const { return members_; }
  uint64_t expired_total() const { return expired_total_; }
  absl::Duration ttl() const { return ttl_; }

 private:
  bool Expired(const Member& m, absl::Time now) const {
    return now - m.last_heartbeat > ttl_ || now > m.cut_to;
  }

  const absl::Duration ttl_;
  uint64_t next_id_ = 1;
  uint64_t expired_total_ = 0;
  std::map<uint64_t, Member> members_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_COORDINATION_LEASE_TABLE_H_
