// spotps-trainer under mTLS with bearer tokens (certificates made by openssl
// in the test): a trainer whose token may not initialise waits for the
// model an admin-token trainer initialises, then both train.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/test_certificates.h"
#include "tests/support/training_job.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;
using testing::LocalShardCluster;
using testing::TempDir;

constexpr char kTrainerToken[] = "trainer-6b1d9f3a7c5e2b8d4f0a";
constexpr char kAdminToken[] = "admin-2e8c4a6f0b9d1e3c5a7f";

TEST(SecureTraining, TrainerTokenWaitsForAnAdminInitThenTrains) {
  TempDir dir;
  const std::string pki = dir.path() + "/pki";
  ASSERT_EQ(mkdir(pki.c_str(), 0700), 0);
  absl::StatusOr<testing::TestCertificates> certs = testing::MakeTestCertificates(pki);
  ASSERT_TRUE(certs.ok()) << certs.status();
  absl::StatusOr<std::string> tokens = testing::MakeTokenFile(dir.path(), 2000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  const std::string table = dir.path() + "/auth-tokens";
  ASSERT_TRUE(
      WriteFileAtomically(table, absl::StrCat(kTrainerToken, " trainer\n", kAdminToken, " admin\n"))
          .ok());
  chmod(table.c_str(), 0600);
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/trainer.token", kTrainerToken).ok());
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/admin.token", kAdminToken).ok());

  auto shards = LocalShardCluster::Start(
      1,
      {"--optimizer=adamw", "--lr=1e-3", "--tls_cert=" + certs->server_cert,
       "--tls_key=" + certs->server_key, "--tls_ca=" + certs->ca, "--auth_tokens=" + table},
      dir.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  auto trainer = [&](const std::string& token_file, int index) {
    return ChildProcess::Start(
        {BinaryPath("spotps-trainer"), "--ps=" + (*shards)->addresses(), "--model=tiny",
         "--data=" + *tokens, "--batch=2", "--seq_len=32", "--threads=1", "--steps=3",
         "--coordinator=none", "--eval_batches=0", absl::StrCat("--worker_index=", index),
         "--tls_ca=" + certs->ca, "--tls_cert=" + certs->client_cert,
         "--tls_key=" + certs->client_key, "--token_file=" + dir.path() + "/" + token_file},
        absl::StrCat(dir.path(), "/trainer", index, ".log"));
  };
  auto plain = trainer("trainer.token", 0);
  ASSERT_TRUE(plain.ok()) << plain.status();
  absl::SleepFor(absl::Seconds(2));  // It starts first: its Init is refused.
  auto admin = trainer("admin.token", 1);
  ASSERT_TRUE(admin.ok()) << admin.status();
  absl::StatusOr<int> admin_exit = (*admin)->Wait(absl::Seconds(240));
  absl::StatusOr<int> plain_exit = (*plain)->Wait(absl::Seconds(240));
  ASSERT_TRUE(admin_exit.ok() && plain_exit.ok()) << testing::LogTails(dir.path());
  EXPECT_EQ(*admin_exit, 0) << testing::LogTails(dir.path());
  EXPECT_EQ(*plain_exit, 0) << testing::LogTails(dir.path());

  ClusterOptions options;
  options.security.ca_pem = *ReadFile(certs->ca);
  options.security.cert_pem = *ReadFile(certs->client_cert);
  options.security.key_pem = *ReadFile(certs->client_key);
  options.security.bearer_token = kTrainerToken;
  auto cluster = Cluster::Connect((*shards)->addresses(), options);
  ASSERT_TRUE(cluster.ok());
  absl::StatusOr<std::vector<v1::StatsResponse>> stats = (*cluster)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  // 3 steps of each trainer; the default "fresh" may average concurrent ones.
  EXPECT_EQ((*stats)[0].pushes_applied(), 6u);
  EXPECT_GE((*stats)[0].global_step(), 3u);
  EXPECT_LE((*stats)[0].global_step(), 6u);
}

}  // namespace
}  // namespace spotps
