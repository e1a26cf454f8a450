// The access table, the token file format and the gate's decisions; the
// gate also in front of a real in-process server on loopback (health states).
#include "ps/rpc/access_policy.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "ps/rpc/shard_security.h"
#include "ps/rpc/token_table.h"
#include "spotps/v1/coordinator.grpc.pb.h"
#include "spotps/v1/parameter_server.grpc.pb.h"
#include "spotps/v1/training_report.grpc.pb.h"
#include "tests/support/raw_grpc_call.h"

namespace spotps {
namespace {

constexpr char kReader[] = "reader-token-0123456789abcdef";
constexpr char kTrainer[] = "trainer-token-0123456789abcdef";
constexpr char kAdmin[] = "admin-token-0123456789abcdef";

TokenTable ThreeTokens() {
  absl::StatusOr<TokenTable> table =
      TokenTable::Parse(absl::StrCat("# roles\n\n", kReader, " reader\n  ", kTrainer,
                                     "\ttrainer  \n", kAdmin, " admin\n"),
                        "tokens");
  EXPECT_TRUE(table.ok()) << table.status();
  return *table;
}

// Every method the generated spotps services declare has a role, and every
// spotps entry of the table is a real method: an RPC added without a role
// fails here.
TEST(AccessTable, CoversEveryMethodOfEveryService) {
  std::set<std::string> declared;
  // Every service of every proto file, found through one message of each
  // (which also links their descriptors in).
  for (const google::protobuf::FileDescriptor* file :
       {v1::GetLayoutRequest::descriptor()->file(), v1::RegisterRequest::descriptor()->file(),
        v1::TrainingReportRequest::descriptor()->file()}) {
    ASSERT_GT(file->service_count(), 0) << file->name();
    for (int s = 0; s < file->service_count(); ++s) {
      const google::protobuf::ServiceDescriptor* service = file->service(s);
      for (int i = 0; i < service->method_count(); ++i) {
        const std::string method =
            absl::StrCat("/", service->full_name(), "/", service->method(i)->name());
        declared.insert(method);
        EXPECT_TRUE(RequiredRole(method).has_value()) << method << " has no role in the table";
      }
    }
  }
  size_t spotps_entries = 0;
  for (const auto& [method, role] : AccessTable()) {
    if (absl::StartsWith(method, "/spotps.")) {
      ++spotps_entries;
      EXPECT_EQ(declared.count(method), 1u) << method << " is in the table but no service has it";
    }
  }
  EXPECT_EQ(declared.size(), spotps_entries);
  EXPECT_EQ(RequiredRole("/grpc.health.v1.Health/Check"), Role::kPublic);
  EXPECT_EQ(RequiredRole("/spotps.v1.ParameterServer/Init"), Role::kAdmin);
  EXPECT_EQ(RequiredRole("/spotps.v1.ParameterServer/Push"), Role::kTrainer);
  EXPECT_EQ(RequiredRole("/spotps.v1.ParameterServer/Pull"), Role::kReader);
  EXPECT_FALSE(RequiredRole("/spotps.v1.ParameterServer/Nope").has_value());
}

TEST(TokenTable, ParsesRolesCommentsAndWhitespace) {
  TokenTable table = ThreeTokens();
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(table.RoleOf(kReader), Role::kReader);
  EXPECT_EQ(table.RoleOf(kTrainer), Role::kTrainer);
  EXPECT_EQ(table.RoleOf(kAdmin), Role::kAdmin);
  EXPECT_FALSE(table.RoleOf("").has_value());
  EXPECT_FALSE(table.RoleOf("reader-token-0123456789abcde").has_value());    // A prefix.
  EXPECT_FALSE(table.RoleOf("reader-token-0123456789abcdefX").has_value());  // Longer.
  EXPECT_FALSE(table.RoleOf(std::string(1000, 'a')).has_value());
}

TEST(TokenTable, RefusesWeakDuplicateAndMalformedEntries) {
  struct Case {
    std::string text;
    std::string error;
  };
  const std::string good(kReader);
  for (const Case& c : std::vector<Case>{
           {"short reader\n", "weak"},
           {good + " reader\n" + good + " admin\n", "duplicate"},
           {good + " root\n", "unknown role"},
           {good + "\n", "TOKEN ROLE"},
           {good + " reader extra\n", "TOKEN ROLE"},
           {"# nothing\n", "no token"},
           {std::string(300, 'x') + " reader\n", "weak"},
       }) {
    absl::StatusOr<TokenTable> table = TokenTable::Parse(c.text, "f");
    ASSERT_FALSE(table.ok()) << c.text;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(table.status().message(), c.error)) << table.status();
  }
}

TEST(ListenAddress, LoopbackOrNot) {
  for (const char* a : {"127.0.0.1:7000", "127.1.2.3:0", "127.255.255.255:1", "localhost:7000",
                        "[::1]:7000", "[0:0:0:0:0:0:0:1]:7000", "[::ffff:127.0.0.1]:7000"}) {
    EXPECT_TRUE(IsLoopbackListenAddress(a)) << a;
  }
  // Names are not addresses: 127.0.0.1.example.com resolves wherever its
  // owner likes.
  for (const char* a : {"0.0.0.0:7000", "10.0.0.1:7000", "[::]:7000", "myhost:7000", ":7000",
                        "127.0.0.1.example.com:0", "127.example.com:7000", "127.0.0.1.:7000",
                        "localhost.example.com:7000", "[::ffff:10.0.0.1]:7000", "128.0.0.1:7000",
                        "[::2]:7000", "127.0.0.256:7000"}) {
    EXPECT_FALSE(IsLoopbackListenAddress(a)) << a;
  }
}

TEST(ShardAccessGate, DecidesByTokenRoleAndServingState) {
  ShardAccessGate gate(ThreeTokens());
  const std::string bearer_reader = absl::StrCat("Bearer ", kReader);
  const std::string bearer_admin = absl::StrCat("Bearer ", kAdmin);
  const char kPush[] = "/spotps.v1.ParameterServer/Push";
  const char kHealth[] = "/grpc.health.v1.Health/Check";
  // No server attached: not even health answers (gRPC's would say SERVING).
  EXPECT_EQ(gate.Admit(kHealth, {}).code, GRPC_STATUS_UNAVAILABLE);
  EXPECT_EQ(gate.Admit(kPush, {bearer_admin}).code, GRPC_STATUS_UNAVAILABLE);
  gate.SetServing(true);
  EXPECT_EQ(gate.Admit(kPush, {bearer_admin}).code, GRPC_STATUS_OK);
  EXPECT_EQ(gate.Admit(kPush, {bearer_reader}).code, GRPC_STATUS_PERMISSION_DENIED);
  EXPECT_EQ(gate.Admit(kPush, {}).code, GRPC_STATUS_UNAUTHENTICATED);
  EXPECT_EQ(gate.Admit(kPush, {kAdmin}).code, GRPC_STATUS_UNAUTHENTICATED);  // No "Bearer ".
  EXPECT_EQ(gate.Admit(kPush, {bearer_admin, bearer_admin}).code, GRPC_STATUS_UNAUTHENTICATED);
  EXPECT_EQ(gate.Admit("/spotps.v1.ParameterServer/Nope", {bearer_admin}).code,
            GRPC_STATUS_PERMISSION_DENIED);
  gate.SetServing(false, "shutting down");
  const ShardAccessGate::Decision d = gate.Admit(kPush, {bearer_admin});
  EXPECT_EQ(d.code, GRPC_STATUS_UNAVAILABLE);
  EXPECT_EQ(d.message, "access: shard is shutting down");

  ShardAccessGate open_gate(std::nullopt);  // No token table: anyone.
  open_gate.SetServing(true);
  EXPECT_EQ(open_gate.Admit(kPush, {}).code, GRPC_STATUS_OK);
}

// A real server on plaintext loopback behind the gate: health answers only
// once the server is attached, then follows the serving state, calls are refused while not serving, and
// tokens are checked although the connection is plaintext.
TEST(ShardAccessGate, GatesARealPlaintextServer) {
  ShardAccessGate gate(ThreeTokens());
  EnableHealthAndReflection();
  v1::ParameterServer::Service unimplemented;  // Every handler: UNIMPLEMENTED.
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", GatedServerCredentials(ShardSecurityOptions{}, &gate),
                           &port);
  builder.RegisterService(&unimplemented);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  // Started but not attached: gRPC's health service already says SERVING
  // on its own; the gate keeps probes from hearing it.
  EXPECT_NE(testing::HealthStatus(channel), "SERVING");
  EXPECT_NE(testing::HealthStatus(channel).find("starting"), std::string::npos);
  gate.SetServing(false, "restoring its checkpoint");
  gate.AttachServer(server.get());
  const char kStats[] = "/spotps.v1.ParameterServer/Stats";
  EXPECT_EQ(testing::HealthStatus(channel), "NOT_SERVING");
  testing::RawReply r = testing::RawGrpcCall(channel, kStats, "", kReader, absl::Seconds(5));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(r.status.error_message(), "access: shard is restoring its checkpoint");

  gate.SetServing(true);
  EXPECT_EQ(testing::HealthStatus(channel), "SERVING");
  r = testing::RawGrpcCall(channel, kStats, "", kReader, absl::Seconds(5));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNIMPLEMENTED);  // Reached the handler.
  r = testing::RawGrpcCall(channel, kStats, "", "", absl::Seconds(5));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  r = testing::RawGrpcCall(channel, "/spotps.v1.ParameterServer/Push", "", kReader,
                           absl::Seconds(5));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);

  gate.SetServing(false, "shutting down");
  EXPECT_EQ(testing::HealthStatus(channel), "NOT_SERVING");
  server->Shutdown();
}

}  // namespace
}  // namespace spotps
