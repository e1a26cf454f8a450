// Two real spotps-ps processes under mTLS with bearer tokens (certificates
// made by openssl in the test): every RPC against every role, refusals that
// change nothing, transport refusals, health, reflection, the peer calls
// shard 0 makes with its admin token, the metrics endpoint and status page
// behind the same doors, and the flags of spotps-ctl.
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <google/protobuf/descriptor.pb.h>
#include <map>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "common/atomic_file.h"
#include "common/channel_security.h"
#include "google/protobuf/unknown_field_set.h"
#include "ps/rpc/access_policy.h"
#include "spotps/v1/coordinator.grpc.pb.h"
#include "tests/support/child_process.h"
#include "tests/support/raw_grpc_call.h"
#include "tests/support/test_certificates.h"

namespace spotps {
namespace {

using testing::ChildProcess;
using testing::LocalShardCluster;
using testing::RawGrpcCall;
using testing::RawReply;
using testing::TempDir;
using testing::TestCertificates;

const std::map<Role, std::string>& Tokens() {
  static const auto* const tokens = new std::map<Role, std::string>{
      {Role::kReader, "r3ader-5c1f0e7a9b2d4c6e8f1a3b5c"},
      {Role::kTrainer, "tra1ner-7d2e4f6a8b0c1d3e5f7a9b1c"},
      {Role::kAdmin, "adm1n-9e8d7c6b5a4f3e2d1c0b9a8f"},
  };
  return *tokens;
}
constexpr char kWrongToken[] = "not-a-token-of-this-cluster-000";
// A second trainer: the same role, another identity.
constexpr char kOtherTrainerToken[] = "tra1ner-2b4d6f8a0c2e4a6c8e0b2d4f";

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

// Big enough for a partition on each shard.
ModelLayout Layout() { return *ModelLayout::Create({{"a", {300, 300}}, {"b", {300, 300}}}); }

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string pki = dir_.path() + "/pki";
    ASSERT_EQ(mkdir(pki.c_str(), 0700), 0);
    absl::StatusOr<TestCertificates> certs = testing::MakeTestCertificates(pki);
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = *certs;
    std::string table = "# token role\n";
    for (const auto& [role, token] : Tokens())
      absl::StrAppend(&table, token, " ", RoleName(role), "\n");
    absl::StrAppend(&table, kOtherTrainerToken, " trainer\n");
    ASSERT_TRUE(WriteFileAtomically(Path("tokens"), table).ok());
    chmod(Path("tokens").c_str(), 0600);
    for (const auto& [role, token] : Tokens()) {
      ASSERT_TRUE(WriteFileAtomically(Path(absl::StrCat(RoleName(role), ".token")),
                                      absl::StrCat(token, "\n"))
                      .ok());
    }
    auto shards = LocalShardCluster::Start(
        2,
        [this](int index, const std::string& addresses) {
          std::vector<std::string> flags = {"--optimizer=sgd",
                                            "--lr=0.5",
                                            "--tls_cert=" + certs_.server_cert,
                                            "--tls_key=" + certs_.server_key,
                                            "--tls_ca=" + certs_.ca,
                                            "--auth_tokens=" + Path("tokens"),
                                            absl::StrCat("--checkpoint_dir=", Path("ckpt"), index)};
          if (index == 0) {
            flags.push_back("--metrics_listen=127.0.0.1:0");
            std::vector<std::string> all = absl::StrSplit(addresses, ',');
            flags.push_back("--peers=" + all[1]);
            flags.push_back("--token_file=" + Path("admin.token"));
            flags.push_back("--epochs=1");
            flags.push_back("--units_per_epoch=8");
          }
          return flags;
        },
        dir_.path());
    ASSERT_TRUE(shards.ok()) << shards.status();
    shards_ = *std::move(shards);
  }

  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  std::string Address(int i) const { return absl::StrCat("127.0.0.1:", shards_->port(i)); }

  // mTLS with the test client certificate and `token` (empty: none).
  ChannelSecurity Security(const std::string& token) const {
    ChannelSecurity s;
    s.ca_pem = Read(certs_.ca);
    s.cert_pem = Read(certs_.client_cert);
    s.key_pem = Read(certs_.client_key);
    s.bearer_token = token;
    return s;
  }
  std::shared_ptr<grpc::Channel> Channel(int shard, const ChannelSecurity& security) const {
    return CreateSecureChannel(Address(shard), security, grpc::ChannelArguments());
  }
  std::unique_ptr<Cluster> Connect(const ChannelSecurity& security) const {
    ClusterOptions options;
    options.security = security;
    options.retry.max_attempts = 2;
    options.retry.deadline = absl::Seconds(10);
    auto cluster = Cluster::Connect(shards_->addresses(), options);
    EXPECT_TRUE(cluster.ok()) << cluster.status();
    return *std::move(cluster);
  }
  std::vector<v1::StatsResponse> AdminStats() const {
    absl::StatusOr<std::vector<v1::StatsResponse>> stats =
        Connect(Security(Tokens().at(Role::kAdmin)))->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *stats : std::vector<v1::StatsResponse>(2);
  }

  TempDir dir_;
  TestCertificates certs_;
  std::unique_ptr<LocalShardCluster> shards_;
};

// Every method of the access table, called on shard 0 (which serves both
// services) by no token, a wrong token and each role. Refusals come from the
// gate ("access: ..."); an admitted call reaches its handler, which may still
// refuse the empty request for its own reasons.
TEST_F(SecurityTest, EveryRoleBoundaryOnEveryRpc) {
  auto channel = Channel(0, Security(""));
  const std::vector<std::pair<std::string, std::string>> callers = {
      {"none", ""},
      {"wrong", kWrongToken},
      {"reader", Tokens().at(Role::kReader)},
      {"trainer", Tokens().at(Role::kTrainer)},
      {"admin", Tokens().at(Role::kAdmin)}};
  std::string matrix =
      "method                                                      none   wrong  reader trainer "
      "admin\n";
  for (const auto& [method, required] : AccessTable()) {
    std::string row = method;
    row.resize(60, ' ');
    for (const auto& [who, token] : callers) {
      const bool watch = absl::EndsWith(method, "/Watch");  // Streams until the deadline.
      RawReply reply = RawGrpcCall(channel, method, "", token,
                                   watch ? absl::Milliseconds(500) : absl::Seconds(10));
      const bool refused = absl::StartsWith(reply.status.error_message(), "access: ");
      grpc::StatusCode expected = grpc::StatusCode::OK;  // OK here: admitted.
      if (required != Role::kPublic) {
        if (token.empty() || token == kWrongToken) {
          expected = grpc::StatusCode::UNAUTHENTICATED;
        } else if (*ParseRole(who) < required) {
          expected = grpc::StatusCode::PERMISSION_DENIED;
        }
      }
      if (expected == grpc::StatusCode::OK) {
        EXPECT_FALSE(refused) << method << " by " << who << ": " << reply.status.error_message();
        absl::StrAppend(&row, " ok    ");
      } else {
        EXPECT_TRUE(refused) << method << " by " << who << ": " << reply.status.error_message();
        EXPECT_EQ(reply.status.error_code(), expected) << method << " by " << who;
        absl::StrAppend(&row,
                        expected == grpc::StatusCode::UNAUTHENTICATED ? " UNAUTH" : " DENIED");
      }
    }
    absl::StrAppend(&matrix, row, "\n");
  }
  std::printf("%s", matrix.c_str());
  // The admitted empty Init and Push calls were refused by the handlers, and
  // the refused ones never reached them: nothing changed on either shard.
  for (const v1::StatsResponse& s : AdminStats()) {
    EXPECT_FALSE(s.initialized());
    EXPECT_EQ(s.global_step(), 0u);
  }
}

// Through the client library: calls refused by the gate change no state;
// the same calls with the right role succeed; shard 0's checkpoint round
// reaches shard 1 over mTLS with its admin token.
TEST_F(SecurityTest, RefusedCallsChangeNothing) {
  const ModelLayout layout = Layout();
  const std::vector<float> w0(layout.total_elements(), 1.0f);
  auto reader = Connect(Security(Tokens().at(Role::kReader)));
  auto trainer = Connect(Security(Tokens().at(Role::kTrainer)));
  auto admin = Connect(Security(Tokens().at(Role::kAdmin)));
  auto anonymous = Connect(Security(""));
  auto wrong = Connect(Security(kWrongToken));

  EXPECT_EQ(trainer->Init(layout, w0).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(anonymous->Init(layout, w0).status().code(), absl::StatusCode::kUnauthenticated);
  for (const v1::StatsResponse& s : AdminStats()) EXPECT_FALSE(s.initialized());
  ASSERT_TRUE(admin->Init(layout, w0).ok());

  ASSERT_TRUE(reader->FetchLayout().ok());
  ASSERT_TRUE(trainer->FetchLayout().ok());
  WeightSnapshot weights;
  ASSERT_TRUE(reader->Pull(v1::DTYPE_FP32, &weights).ok());
  const std::vector<float> gradient(layout.total_elements(), 0.25f);
  EXPECT_EQ(reader->Push(gradient, weights.versions, v1::DTYPE_FP32).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(wrong->Stats().status().code(), absl::StatusCode::kUnauthenticated);
  for (const v1::StatsResponse& s : AdminStats()) EXPECT_EQ(s.global_step(), 0u);
  WeightSnapshot after;
  ASSERT_TRUE(reader->Pull(v1::DTYPE_FP32, &after).ok());
  EXPECT_EQ(after.values, weights.values);

  ASSERT_TRUE(trainer->Push(gradient, weights.versions, v1::DTYPE_FP32).ok());
  for (const v1::StatsResponse& s : AdminStats()) EXPECT_EQ(s.global_step(), 1u);

  // Coordinator: a reader may not register or checkpoint; an admin may.
  RetryPolicy policy;
  policy.max_attempts = 2;
  auto reader_coordinator =
      CoordinatorClient::Connect(Address(0), policy, Security(Tokens().at(Role::kReader)));
  auto admin_coordinator =
      CoordinatorClient::Connect(Address(0), policy, Security(Tokens().at(Role::kAdmin)));
  ASSERT_TRUE(reader_coordinator.ok() && admin_coordinator.ok());
  EXPECT_EQ((*reader_coordinator)->Register("r").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*reader_coordinator)->CheckpointNow().status().code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<v1::ProgressResponse> progress = (*reader_coordinator)->Progress();
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->workers_size(), 0);
  for (const v1::StatsResponse& s : AdminStats()) EXPECT_EQ(s.last_checkpoint_id(), 0u);
  absl::StatusOr<v1::CheckpointNowResponse> round = (*admin_coordinator)->CheckpointNow();
  ASSERT_TRUE(round.ok()) << round.status();
  for (const v1::StatsResponse& s : AdminStats()) EXPECT_GE(s.last_checkpoint_id(), 1u);

  // Shard 1 killed and restarted: it restores that checkpoint before it
  // reports SERVING and takes calls again.
  shards_->shard(1).Signal(SIGKILL);
  ASSERT_TRUE(shards_->shard(1).Wait(absl::Seconds(10)).ok());
  ASSERT_TRUE(shards_->Restart(1).ok());
  EXPECT_EQ(testing::HealthStatus(Channel(1, Security(""))), "SERVING");
  const std::vector<v1::StatsResponse> restarted = AdminStats();
  EXPECT_GE(restarted[1].restored_checkpoint_id(), 1u);
  EXPECT_EQ(restarted[1].global_step(), 1u);
}

// A worker's calls need the key its registration returned, from the
// identity that registered: another trainer token, even holding the key, or
// an admin gets PERMISSION_DENIED, and nothing changes.
TEST_F(SecurityTest, OnlyTheRegisteringIdentityWithItsKeyActsForAWorker) {
  RetryPolicy policy;
  policy.max_attempts = 2;
  auto owner =
      CoordinatorClient::Connect(Address(0), policy, Security(Tokens().at(Role::kTrainer)));
  auto other = CoordinatorClient::Connect(Address(0), policy, Security(kOtherTrainerToken));
  ASSERT_TRUE(owner.ok() && other.ok());
  absl::StatusOr<v1::RegisterResponse> reg = (*owner)->Register("owner");
  ASSERT_TRUE(reg.ok()) << reg.status();
  EXPECT_EQ(reg->worker_key().size(), 16u);
  const uint64_t id = reg->worker_id();
  absl::StatusOr<v1::AcquireUnitResponse> unit = (*owner)->Acquire(id);
  ASSERT_TRUE(unit.ok()) << unit.status();
  ASSERT_EQ(unit->outcome(), v1::AcquireUnitResponse::OUTCOME_UNIT);

  // Knowing the id (Progress shows it to any reader) is not enough.
  EXPECT_EQ((*other)->Heartbeat(id).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*other)->Attend(id)->Wait().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*other)->Release(id, unit->unit().epoch(), unit->unit().index()).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*other)->Commit(id, unit->unit().epoch(), unit->unit().index()).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*other)->Deregister(id).code(), absl::StatusCode::kPermissionDenied);
  // Nor is the key, from another identity.
  for (const std::string& token : {std::string(kOtherTrainerToken), Tokens().at(Role::kAdmin)}) {
    auto stub = v1::Coordinator::NewStub(Channel(0, Security(token)));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::ReleaseUnitRequest release;
    release.set_worker_id(id);
    release.set_worker_key(reg->worker_key());
    release.set_epoch(unit->unit().epoch());
    release.set_index(unit->unit().index());
    v1::ReleaseUnitResponse response;
    const grpc::Status s = stub->ReleaseUnit(&context, release, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
    EXPECT_TRUE(absl::StrContains(s.error_message(), "registered as token 2 (trainer)"))
        << s.error_message();
  }
  absl::StatusOr<v1::ProgressResponse> progress = (*other)->Progress();
  ASSERT_TRUE(progress.ok()) << progress.status();
  ASSERT_EQ(progress->workers_size(), 1);
  EXPECT_EQ(progress->epochs(0).leased(), 1u);  // Still the owner's.
  EXPECT_EQ(progress->epochs(0).committed(), 0u);

  // The owner's own calls go through.
  EXPECT_TRUE((*owner)->Heartbeat(id).ok());
  absl::StatusOr<bool> committed = (*owner)->Commit(id, unit->unit().epoch(), unit->unit().index());
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_FALSE(*committed);
  EXPECT_TRUE((*owner)->Deregister(id).ok());
}

// Plaintext to a TLS shard, TLS without a client certificate, and a
// certificate from another CA all fail; the right certificate works.
TEST_F(SecurityTest, TransportNeedsTlsAndATrustedClientCertificate) {
  const std::string reader_token = Tokens().at(Role::kReader);
  ChannelSecurity plaintext;
  plaintext.bearer_token = reader_token;
  ChannelSecurity no_certificate = Security(reader_token);
  no_certificate.cert_pem.clear();
  no_certificate.key_pem.clear();
  ChannelSecurity rogue = Security(reader_token);
  rogue.cert_pem = Read(certs_.rogue_cert);
  rogue.key_pem = Read(certs_.rogue_key);
  for (const auto& [what, security] : std::vector<std::pair<std::string, ChannelSecurity>>{
           {"plaintext", plaintext},
           {"no client certificate", no_certificate},
           {"untrusted client certificate", rogue}}) {
    absl::StatusOr<std::vector<v1::StatsResponse>> stats = Connect(security)->Stats();
    EXPECT_FALSE(stats.ok()) << what;
    EXPECT_EQ(stats.status().code(), absl::StatusCode::kUnavailable)
        << what << ": " << stats.status();
  }
  EXPECT_TRUE(Connect(Security(reader_token))->Stats().ok());
}

// The health service answers without a token; reflection lists the
// services (a reader may ask, an anonymous caller may not).
TEST_F(SecurityTest, HealthAndReflection) {
  auto channel = Channel(0, Security(""));
  EXPECT_EQ(testing::HealthStatus(channel), "SERVING");
  EXPECT_EQ(testing::HealthStatus(Channel(1, Security(""))), "SERVING");
  // ServerReflectionRequest{list_services: ""}: field 7, length 0. Tools
  // try v1 first, then v1alpha: both answer a reader alike.
  const std::string list_services("\x3a\x00", 2);
  std::set<std::string> services;
  for (const char* reflection :
       {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"}) {
    RawReply anonymous = RawGrpcCall(channel, reflection, list_services, "", absl::Seconds(10));
    EXPECT_EQ(anonymous.status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << reflection;
    RawReply reply = RawGrpcCall(channel, reflection, list_services, Tokens().at(Role::kReader),
                                 absl::Seconds(10));
    ASSERT_TRUE(reply.got_message) << reflection << ": " << reply.status.error_message();
    // ServerReflectionResponse.list_services_response (6) .service (1) .name (1).
    std::set<std::string> listed;
    google::protobuf::UnknownFieldSet response;
    ASSERT_TRUE(response.ParseFromString(reply.first_message));
    for (int i = 0; i < response.field_count(); ++i) {
      if (response.field(i).number() != 6) continue;
      google::protobuf::UnknownFieldSet list;
      ASSERT_TRUE(list.ParseFromString(response.field(i).length_delimited()));
      for (int j = 0; j < list.field_count(); ++j) {
        google::protobuf::UnknownFieldSet service;
        ASSERT_TRUE(service.ParseFromString(list.field(j).length_delimited()));
        listed.insert(service.field(0).length_delimited());
      }
    }
    EXPECT_EQ(listed, (std::set<std::string>{
                          "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                          "grpc.reflection.v1alpha.ServerReflection", "spotps.v1.Coordinator",
                          "spotps.v1.ParameterServer", "spotps.v1.TrainingReports"}))
        << reflection;
    services = listed;
  }
  // v1 describes a service: file_containing_symbol (4) answers with
  // file_descriptor_response (4) whose first file defines it.
  {
    google::protobuf::UnknownFieldSet request;
    request.AddLengthDelimited(4, "spotps.v1.ParameterServer");
    std::string bytes;
    ASSERT_TRUE(request.SerializeToString(&bytes));
    RawReply reply =
        RawGrpcCall(channel, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", bytes,
                    Tokens().at(Role::kReader), absl::Seconds(10));
    ASSERT_TRUE(reply.got_message) << reply.status.error_message();
    google::protobuf::UnknownFieldSet response;
    ASSERT_TRUE(response.ParseFromString(reply.first_message));
    std::string file_name;
    for (int i = 0; i < response.field_count(); ++i) {
      if (response.field(i).number() != 4) continue;
      google::protobuf::UnknownFieldSet files;
      ASSERT_TRUE(files.ParseFromString(response.field(i).length_delimited()));
      google::protobuf::FileDescriptorProto first;
      ASSERT_TRUE(first.ParseFromString(files.field(0).length_delimited()));
      file_name = first.name();
    }
    EXPECT_EQ(file_name, "spotps/v1/parameter_server.proto");
  }
  // Every service the shard serves has its methods in the access table.
  for (const std::string& service : services) {
    bool listed = false;
    for (const auto& [method, role] : AccessTable()) {
      listed |= absl::StartsWith(method, absl::StrCat("/", service, "/"));
    }
    EXPECT_TRUE(listed) << service;
  }
}

// Everything `stream` yields until it closes or fails (unless `ec` already
// holds an error).
template <class Stream>
std::string ReadUntilClosed(Stream& stream, boost::system::error_code& ec) {
  std::string reply;
  char buf[4096];
  while (!ec) {
    const size_t n = stream.read_some(boost::asio::buffer(buf), ec);
    reply.append(buf, n);
  }
  return reply;
}

// One HTTP/1.1 exchange over TLS with a server `ca_pem` signed for
// "localhost"; everything the server sent, or the TLS error.
absl::StatusOr<std::string> HttpsExchange(int port, const std::string& ca_pem,
                                          const std::string& request) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ssl::context tls(asio::ssl::context::tls_client);
  boost::system::error_code ec;
  tls.add_certificate_authority(asio::buffer(ca_pem), ec);
  if (ec) return absl::InternalError(ec.message());
  asio::ssl::stream<asio::ip::tcp::socket> stream(io, tls);
  stream.set_verify_mode(asio::ssl::verify_peer);
  stream.set_verify_callback(asio::ssl::host_name_verification("localhost"));
  stream.lowest_layer().connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)},
                                ec);
  if (!ec) stream.handshake(asio::ssl::stream_base::client, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("TLS: ", ec.message()));
  asio::write(stream, asio::buffer(request), ec);
  return ReadUntilClosed(stream, ec);
}

// The same over plain TCP.
std::string PlainExchange(int port, const std::string& request) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)}, ec);
  if (!ec) asio::write(socket, asio::buffer(request), ec);
  return ReadUntilClosed(socket, ec);
}

// Shard 0's metrics port, from its "metrics on https://HOST:PORT/metrics" line.
int MetricsPort(const std::string& log) {
  const std::string kLine = "metrics on https://127.0.0.1:";
  const size_t at = log.find(kLine);
  int port = 0;
  if (at == std::string::npos) return 0;
  const std::string rest = log.substr(at + kLine.size());
  return absl::SimpleAtoi(rest.substr(0, rest.find('/')), &port) ? port : 0;
}

// /metrics, / and /status.json are served over TLS with the shard's
// certificate, to a reader's token or better, given as Bearer (Prometheus)
// or as Basic's password (a browser's login prompt); no token, a wrong one
// or plaintext HTTP get nothing.
TEST_F(SecurityTest, MetricsAndStatusPageNeedTlsAndAReadersToken) {
  const int port = MetricsPort(Read(Path("shard0.log")));
  ASSERT_GT(port, 0) << Read(Path("shard0.log"));
  const std::string ca = Read(certs_.ca);
  auto get = [&](const std::string& path, const std::string& authorization) {
    std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: localhost\r\n");
    if (!authorization.empty()) absl::StrAppend(&request, "Authorization: ", authorization, "\r\n");
    absl::StatusOr<std::string> reply =
        HttpsExchange(port, ca, absl::StrCat(request, "Connection: close\r\n\r\n"));
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : "";
  };
  const std::string anonymous = get("/metrics", "");
  EXPECT_TRUE(absl::StartsWith(anonymous, "HTTP/1.1 401")) << anonymous;
  EXPECT_TRUE(absl::StrContains(anonymous, "WWW-Authenticate: Bearer")) << anonymous;
  EXPECT_TRUE(absl::StrContains(anonymous, "WWW-Authenticate: Basic")) << anonymous;
  EXPECT_FALSE(absl::StrContains(anonymous, "spotps_shard_")) << anonymous;
  EXPECT_TRUE(
      absl::StartsWith(get("/metrics", absl::StrCat("Bearer ", kWrongToken)), "HTTP/1.1 401"));
  EXPECT_TRUE(absl::StartsWith(get("/status.json", "Bearer"), "HTTP/1.1 401"));
  EXPECT_TRUE(absl::StartsWith(get("/", "Basic !!notbase64"), "HTTP/1.1 401"));
  for (const auto& [role, token] : Tokens()) {
    const std::string metrics = get("/metrics", "Bearer " + token);
    EXPECT_TRUE(absl::StartsWith(metrics, "HTTP/1.1 200")) << RoleName(role) << metrics;
    EXPECT_TRUE(absl::StrContains(metrics, "spotps_shard_global_step")) << metrics;
  }
  const std::string basic =
      "Basic " + absl::Base64Escape(absl::StrCat("operator:", Tokens().at(Role::kReader)));
  const std::string page = get("/", basic);
  EXPECT_TRUE(absl::StartsWith(page, "HTTP/1.1 200")) << page;
  EXPECT_TRUE(absl::StrContains(page, "text/html")) << page;
  const std::string json = get("/status.json", basic);
  EXPECT_TRUE(absl::StartsWith(json, "HTTP/1.1 200")) << json;
  EXPECT_TRUE(absl::StrContains(json, "application/json")) << json;

  // Plain HTTP to the TLS port, and TLS with a CA that did not sign the
  // shard's certificate.
  const std::string plain = PlainExchange(
      port, absl::StrCat("GET /metrics HTTP/1.1\r\n",
                         "Host: localhost\r\nAuthorization: "
                         "Bearer ",
                         Tokens().at(Role::kReader), "\r\nConnection: close\r\n\r\n"));
  EXPECT_FALSE(absl::StrContains(plain, "spotps_shard_")) << plain;
  EXPECT_FALSE(absl::StartsWith(plain, "HTTP/1.1 200")) << plain;
  absl::StatusOr<std::string> untrusted = HttpsExchange(
      port, Read(certs_.rogue_cert), "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_FALSE(untrusted.ok()) << *untrusted;
}

// Its exit code; -1 (and a failure) unless it ran to its end within 60 s.
int ExitCode(const std::vector<std::string>& argv, const std::string& log) {
  absl::StatusOr<testing::ExitResult> run = testing::RunToExit(argv, log, absl::Seconds(60));
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? run->exit_code : -1;
}

// spotps-ctl takes the same flags; spotps-ps refuses plaintext on a
// non-loopback address unless told --insecure.
TEST_F(SecurityTest, BinariesTakeTheFlags) {
  const std::vector<std::string> ctl = {testing::BinaryPath("spotps-ctl"),
                                        "--ps=" + shards_->addresses(),
                                        "--tls_ca=" + certs_.ca,
                                        "--tls_cert=" + certs_.client_cert,
                                        "--tls_key=" + certs_.client_key,
                                        "--rpc_timeout_s=10",
                                        "status"};
  std::vector<std::string> with_token = ctl;
  with_token.insert(with_token.end() - 1, "--token_file=" + Path("reader.token"));
  EXPECT_EQ(ExitCode(with_token, Path("ctl-ok.log")), 0) << Read(Path("ctl-ok.log"));
  EXPECT_EQ(ExitCode(ctl, Path("ctl-anonymous.log")), 1);
  EXPECT_TRUE(absl::StrContains(Read(Path("ctl-anonymous.log")), "UNAUTHENTICATED") ||
              absl::StrContains(Read(Path("ctl-anonymous.log")), "authorization"))
      << Read(Path("ctl-anonymous.log"));

  const std::vector<std::string> ps = {testing::BinaryPath("spotps-ps"), "--check_flags",
                                       "--listen=0.0.0.0:7000"};
  EXPECT_EQ(ExitCode(ps, Path("ps-plain.log")), 2);
  EXPECT_TRUE(absl::StrContains(Read(Path("ps-plain.log")), "refusing plaintext"))
      << Read(Path("ps-plain.log"));
  // Only literal loopback addresses and "localhost" may go plaintext; a name
  // that merely starts like one may not.
  int run = 0;
  for (const char* listen : {"--listen=127.0.0.1.example.com:0", "--listen=127.example.com:0"}) {
    const std::string log = Path(absl::StrCat("ps-name", run++, ".log"));
    EXPECT_EQ(ExitCode({ps[0], ps[1], listen}, log), 2) << listen;
    EXPECT_TRUE(absl::StrContains(Read(log), "refusing plaintext")) << listen << Read(log);
  }
  for (const char* listen : {"--listen=127.0.0.1:0", "--listen=[::1]:0", "--listen=localhost:0"}) {
    const std::string log = Path(absl::StrCat("ps-loopback", run++, ".log"));
    EXPECT_EQ(ExitCode({ps[0], ps[1], listen}, log), 0) << listen << Read(log);
  }
  std::vector<std::string> insecure = ps;
  insecure.push_back("--insecure");
  EXPECT_EQ(ExitCode(insecure, Path("ps-insecure.log")), 0) << Read(Path("ps-insecure.log"));
  std::vector<std::string> tls = ps;
  tls.push_back("--tls_cert=" + certs_.server_cert);
  tls.push_back("--tls_key=" + certs_.server_key);
  EXPECT_EQ(ExitCode(tls, Path("ps-tls.log")), 0) << Read(Path("ps-tls.log"));
  // The metrics endpoint follows the same rule as --listen.
  const std::vector<std::string> metrics_ps = {testing::BinaryPath("spotps-ps"), "--check_flags",
                                               "--listen=127.0.0.1:0",
                                               "--metrics_listen=0.0.0.0:9100"};
  EXPECT_EQ(ExitCode(metrics_ps, Path("ps-metrics-plain.log")), 2);
  EXPECT_TRUE(absl::StrContains(Read(Path("ps-metrics-plain.log")), "refusing plaintext metrics"))
      << Read(Path("ps-metrics-plain.log"));
  std::vector<std::string> metrics_ok = metrics_ps;
  metrics_ok.push_back("--insecure");
  EXPECT_EQ(ExitCode(metrics_ok, Path("ps-metrics-insecure.log")), 0)
      << Read(Path("ps-metrics-insecure.log"));
  metrics_ok = metrics_ps;
  metrics_ok.insert(metrics_ok.end(),
                    {"--tls_cert=" + certs_.server_cert, "--tls_key=" + certs_.server_key});
  EXPECT_EQ(ExitCode(metrics_ok, Path("ps-metrics-tls.log")), 0)
      << Read(Path("ps-metrics-tls.log"));
  std::vector<std::string> weak = tls;
  ASSERT_TRUE(WriteFileAtomically(Path("weak-tokens"), "secret admin\n").ok());
  weak.push_back("--auth_tokens=" + Path("weak-tokens"));
  EXPECT_EQ(ExitCode(weak, Path("ps-weak.log")), 2);
  EXPECT_TRUE(absl::StrContains(Read(Path("ps-weak.log")), "weak")) << Read(Path("ps-weak.log"));
}

}  // namespace
}  // namespace spotps
