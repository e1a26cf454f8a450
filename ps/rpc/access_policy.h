// The role every RPC a shard serves needs: one table, checked by
// ShardAccessGate (shard_security.h) before any handler runs.
//
//   public   grpc.health.v1.Health (probes carry no token)
//   reader   layout, pull, stats, coordinator progress, reflection
//   trainer  reader + push and the coordinator's membership and unit calls
//   admin    trainer + init, checkpoints, sync-round application (shard 0's
//            peer calls), CheckpointNow
#ifndef SPOTPS_PS_RPC_ACCESS_POLICY_H_
#define SPOTPS_PS_RPC_ACCESS_POLICY_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

// Ordered: a role may do everything the roles below it may.
enum class Role { kPublic = 0, kReader = 1, kTrainer = 2, kAdmin = 3 };

// "reader", "trainer" or "admin" (kPublic is no role a token can hold).
absl::StatusOr<Role> ParseRole(absl::string_view name);
const char* RoleName(Role role);

// The least role that may call `method` ("/package.Service/Method"), or
// nullopt for a method the table does not know: refused.
std::optional<Role> RequiredRole(absl::string_view method);

// Every (method, role) of the table, for tests and docs/operations.md.
const std::vector<std::pair<std::string, Role>>& AccessTable();

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_ACCESS_POLICY_H_
