#include "ps/rpc/access_policy.h"

#include "absl/strings/str_cat.h"

namespace spotps {

const std::vector<std::pair<std::string, Role>>& AccessTable() {
  static const auto* const table = new std::vector<std::pair<std::string, Role>>{
      {"/spotps.v1.ParameterServer/GetLayout", Role::kReader},
      {"/spotps.v1.ParameterServer/Pull", Role::kReader},
      {"/spotps.v1.ParameterServer/Stats", Role::kReader},
      {"/spotps.v1.ParameterServer/Watch", Role::kReader},
      {"/spotps.v1.ParameterServer/Push", Role::kTrainer},
      {"/spotps.v1.ParameterServer/Join", Role::kTrainer},
      {"/spotps.v1.ParameterServer/Attend", Role::kTrainer},
      {"/spotps.v1.ParameterServer/Leave", Role::kTrainer},
      {"/spotps.v1.ParameterServer/Init", Role::kAdmin},
      {"/spotps.v1.ParameterServer/WriteCheckpoint", Role::kAdmin},
      {"/spotps.v1.ParameterServer/ApplyRound", Role::kAdmin},
      {"/spotps.v1.Coordinator/Progress", Role::kReader},
      {"/spotps.v1.Coordinator/Register", Role::kTrainer},
      {"/spotps.v1.Coordinator/Heartbeat", Role::kTrainer},
      {"/spotps.v1.Coordinator/Attend", Role::kTrainer},
      {"/spotps.v1.Coordinator/Deregister", Role::kTrainer},
      {"/spotps.v1.Coordinator/AcquireUnit", Role::kTrainer},
      {"/spotps.v1.Coordinator/CommitUnit", Role::kTrainer},
      {"/spotps.v1.Coordinator/ReleaseUnit", Role::kTrainer},
      {"/spotps.v1.Coordinator/CheckpointNow", Role::kAdmin},
      {"/spotps.v1.TrainingReports/Report", Role::kTrainer},
      {"/grpc.health.v1.Health/Check", Role::kPublic},
      {"/grpc.health.v1.Health/Watch", Role::kPublic},
      {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", Role::kReader},
      {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", Role::kReader},
  };
  return *table;
}

std::optional<Role> RequiredRole(absl::string_view method) {
  for (const auto& [name, role] : AccessTable()) {
    if (name == method) return role;
  }
  return std::nullopt;
}

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  if (name == "reader") return Role::kReader;
  if (name == "trainer") return Role::kTrainer;
  if (name == "admin") return Role::kAdmin;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown role '", name, "' (reader, trainer or admin)"));
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kPublic:
      return "public";
    case Role::kReader:
      return "reader";
    case Role::kTrainer:
      return "trainer";
    case Role::kAdmin:
      return "admin";
  }
  return "?";
}

}  // namespace spotps
