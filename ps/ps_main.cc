// spotps-ps: one parameter-server shard.
//
//   spotps-ps --listen=0.0.0.0:7000 --insecure --shard_index=0 --num_shards=2 --optimizer=adamw
//   --lr=3e-4
//
// Serves until SIGTERM or SIGINT, then finishes in-flight RPCs (bounded by
// --shutdown_grace_s) and exits 0.
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <grpcpp/grpcpp.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "common/atomic_file.h"
#include "common/command_line.h"
#include "common/crash_report.h"
#include "common/exit_status.h"
#include "common/http_endpoint.h"
#include "common/kernel_random.h"
#include "common/log.h"
#include "common/process_priority.h"
#include "common/transport_args.h"
#include "ps/checkpoint/checkpoint_round_driver.h"
#include "ps/checkpoint/shard_checkpointer.h"
#include "ps/coordination/peer_shards.h"
#include "ps/coordination/sync_round_driver.h"
#include "ps/rpc/coordinator_service.h"
#include "ps/rpc/parameter_server_service.h"
#include "ps/rpc/server_reflection_v1.h"
#include "ps/rpc/shard_metrics.h"
#include "ps/rpc/shard_security.h"
#include "ps/rpc/status_page.h"
#include "ps/rpc/training_report_service.h"
#include "ps/store/shard_store.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:7000", "Address to serve on; port 0 picks a free port.");
ABSL_FLAG(std::string, port_file, "", "If set, the bound port is written here (atomically).");
ABSL_FLAG(int, nice, 0,
          "Added to the whole shard's nice value (0-19) before its first thread starts: on a "
          "host shared with trainers, 10 lets their compute run ahead of the shard's AdamW "
          "applies and BF16 encoding. 0: unchanged.");
ABSL_FLAG(uint32_t, shard_index, 0, "This shard's index in [0, num_shards).");
ABSL_FLAG(uint32_t, num_shards, 1, "Number of shards in the cluster.");
ABSL_FLAG(std::string, optimizer, "adamw", "sgd or adamw.");
ABSL_FLAG(double, lr, 3e-4, "Base learning rate.");
ABSL_FLAG(std::string, lr_schedule, "constant", "constant, cosine or linear (decay after warmup).");
ABSL_FLAG(int64_t, warmup_steps, 0, "Linear warmup over this many global updates.");
ABSL_FLAG(int64_t, total_steps, 0, "Global update count where the decay ends.");
ABSL_FLAG(double, min_lr_ratio, 0.1, "Final learning rate as a fraction of --lr.");
ABSL_FLAG(double, weight_decay, 0.0, "SGD: L2 penalty; AdamW: decoupled weight decay.");
ABSL_FLAG(double, momentum, 0.0, "SGD momentum.");
ABSL_FLAG(double, dampening, 0.0, "SGD dampening.");
ABSL_FLAG(bool, nesterov, false, "SGD Nesterov momentum.");
ABSL_FLAG(double, beta1, 0.9, "AdamW beta1.");
ABSL_FLAG(double, beta2, 0.999, "AdamW beta2.");
ABSL_FLAG(double, eps, 1e-8, "AdamW epsilon.");
ABSL_FLAG(bool, staleness_lr_scaling, false,
          "Scale each push's lr by 1/(1+staleness) (= --staleness_method=lr).");
ABSL_FLAG(std::string, staleness_method, "",
          "Async mode's treatment of stale gradients: none, lr (lr/(1+staleness)), dc "
          "(delay-compensated AdamW, --dc_lambda) or momentum (beta1 lowered by the implicit "
          "momentum of asynchrony), optionally joined by '+' with avg (average concurrent "
          "pushes), fresh (avg, and each push answered once applied so that trainers compute "
          "on weights that hold it) and warmup (warmup per live worker), e.g. dc+avg. With "
          "--consistency=local:H, fresh (rounds averaged) or delayed (each round applied on "
          "arrival, the outer momentum stepped once per live worker's push: for trainers of "
          "different speeds). Empty: fresh with async and local, none with ssp; see "
          "docs/architecture.md, Async and Local steps.");
ABSL_FLAG(double, dc_lambda, 1.0, "--staleness_method=dc: the compensation's lambda.");
ABSL_FLAG(int, average_pushes, 0,
          "--staleness_method=...+avg: pushes per averaged update; 0: the live workers (shard "
          "0 knows them from its coordinator; other shards then rely on --average_wait_ms).");
ABSL_FLAG(double, average_wait_ms, 1000,
          "--staleness_method=...+avg: apply the held pushes once the oldest waited this long "
          "(local mode: at least a quarter of the trainers' median round time, up to 10 s).");
ABSL_FLAG(int64_t, warmup_steps_per_worker, 10,
          "--staleness_method=...+warmup: warmup updates per live worker.");
ABSL_FLAG(int64_t, max_staleness, -1, "Refuse pushes staler than this; -1: no bound.");
ABSL_FLAG(int64_t, max_message_mb, 64, "Largest gRPC message accepted, MiB.");
ABSL_FLAG(int, shutdown_grace_s, 5, "Seconds in-flight RPCs get after SIGTERM.");
ABSL_FLAG(uint32_t, epochs, 0,
          "Shard 0 only: host the coordinator for this many epochs of work units; 0: none.");
ABSL_FLAG(uint64_t, units_per_epoch, 0, "Work units (one trainer step each) per epoch.");
ABSL_FLAG(uint64_t, data_seed, 1, "Seeds every epoch's shuffled unit order.");
ABSL_FLAG(double, worker_lease_s, 10, "A trainer silent this long is dropped.");
ABSL_FLAG(double, presence_grace_s, 2,
          "Shard 0: a trainer whose presence stream broke (a process killed mid-step closes its "
          "connection) is dropped after this long unless it reconnects; 0: only the lease "
          "drops it.");
ABSL_FLAG(int64_t, max_workers, 4096,
          "Shard 0: trainers registered at once at most; more get RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, min_workers, 0,
          "Shard 0: the job starts once this many trainers are registered together; until then "
          "no unit is leased, so the first trainers start on the same weights. 0 or 1: at once.");
ABSL_FLAG(double, unit_lease_s, 60, "A unit not committed this long is re-issued.");
ABSL_FLAG(std::string, consistency, "async",
          "async, ssp:S (shard 0 holds any trainer more than S units ahead of the slowest), "
          "sync (one gradient per live trainer per round; give it to every shard) or local:H "
          "(trainers take H steps with their own AdamW, then push the change of their weights; "
          "give it to every shard: the outer optimizer defaults to Nesterov SGD, lr 0.7, "
          "momentum 0.9).");
ABSL_FLAG(uint64_t, max_round_contributions, 64,
          "Sync mode: most gradients a shard holds for one round (at least the trainers).");
ABSL_FLAG(int, apply_threads, 0,
          "Threads that apply one update's partitions side by side, so that an update every "
          "trainer waits for (fresh, sync, local) takes less time where the shard has idle "
          "cores; while another update holds them, an update applies on its RPC thread alone. "
          "0: one per core, at most 8; 1: always on the RPC thread.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Where this shard keeps its checkpoints; restores the newest intact one at start.");
ABSL_FLAG(double, checkpoint_every_s, 0,
          "Shard 0: start a checkpoint round on every shard this often; 0: only on request.");
ABSL_FLAG(int, keep_checkpoints, 3, "Checkpoints kept per shard.");
ABSL_FLAG(std::string, peers, "",
          "Shard 0 with checkpoints or sync mode: the other shards' addresses host:port,... "
          "from shard 1 on.");
ABSL_FLAG(std::string, metrics_listen, "",
          "Serve Prometheus metrics at http://host:port/metrics (port 0 picks a free one); "
          "shard 0 also serves its status page at / there. Served over TLS with --tls_cert, "
          "and with --auth_tokens every request needs a reader's token or better (Authorization: "
          "Bearer). Empty: off.");

namespace {

using spotps::RuntimeError;
using spotps::UsageError;

// The flag's value, or in local mode, where it was not given, the outer
// optimizer's default (DiLoCo's Nesterov SGD, lr 0.7, momentum 0.9).
template <typename T>
T FlagOrLocalDefault(const absl::Flag<T>& flag, bool local, T local_default) {
  if (local && !spotps::FlagGiven(absl::GetFlagReflectionHandle(flag).Name())) {
    return local_default;
  }
  return absl::GetFlag(flag);
}

absl::StatusOr<spotps::ShardOptions> OptionsFromFlags() {
  spotps::ShardOptions o;
  o.shard_index = absl::GetFlag(FLAGS_shard_index);
  o.num_shards = absl::GetFlag(FLAGS_num_shards);
  absl::StatusOr<spotps::Consistency> consistency =
      spotps::ParseConsistency(absl::GetFlag(FLAGS_consistency));
  if (!consistency.ok()) return consistency.status();
  const bool local = consistency->mode == spotps::v1::CONSISTENCY_LOCAL;
  absl::StatusOr<spotps::OptimizerKind> kind =
      spotps::ParseOptimizerKind(FlagOrLocalDefault(FLAGS_optimizer, local, std::string("sgd")));
  if (!kind.ok()) return kind.status();
  o.optimizer.kind = *kind;
  o.optimizer.weight_decay = static_cast<float>(absl::GetFlag(FLAGS_weight_decay));
  o.optimizer.momentum = static_cast<float>(FlagOrLocalDefault(FLAGS_momentum, local, 0.9));
  o.optimizer.dampening = static_cast<float>(absl::GetFlag(FLAGS_dampening));
  o.optimizer.nesterov = FlagOrLocalDefault(FLAGS_nesterov, local, true);
  o.optimizer.beta1 = static_cast<float>(absl::GetFlag(FLAGS_beta1));
  o.optimizer.beta2 = static_cast<float>(absl::GetFlag(FLAGS_beta2));
  o.optimizer.eps = static_cast<float>(absl::GetFlag(FLAGS_eps));
  absl::StatusOr<spotps::DecayKind> decay =
      spotps::ParseDecayKind(absl::GetFlag(FLAGS_lr_schedule));
  if (!decay.ok()) return decay.status();
  o.schedule.base_lr = FlagOrLocalDefault(FLAGS_lr, local, 0.7);
  o.schedule.decay = *decay;
  o.schedule.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  o.schedule.total_steps = absl::GetFlag(FLAGS_total_steps);
  o.schedule.min_lr_ratio = absl::GetFlag(FLAGS_min_lr_ratio);
  o.staleness_lr_scaling = absl::GetFlag(FLAGS_staleness_lr_scaling);
  std::string method = absl::GetFlag(FLAGS_staleness_method);
  if (method.empty()) {
    // Plain async learns as well per token as sync only without staleness
    // (docs/architecture.md, Choosing a mode); ssp and sync keep their own
    // rules. Local rounds that end together are averaged as "fresh" pushes.
    const bool plain_async =
        consistency->mode == spotps::v1::CONSISTENCY_ASYNC && !o.staleness_lr_scaling;
    method = plain_async || local ? "fresh" : "none";
  }
  if (absl::Status s = spotps::ParseStalenessSpec(method, &o.staleness); !s.ok()) return s;
  o.staleness.dc_lambda = static_cast<float>(absl::GetFlag(FLAGS_dc_lambda));
  o.staleness.average_pushes = absl::GetFlag(FLAGS_average_pushes);
  o.staleness.average_wait_ms = absl::GetFlag(FLAGS_average_wait_ms);
  o.staleness.share_of_k = local;
  o.staleness.warmup_steps_per_worker = absl::GetFlag(FLAGS_warmup_steps_per_worker);
  o.max_staleness = absl::GetFlag(FLAGS_max_staleness);
  o.sync_rounds = consistency->mode == spotps::v1::CONSISTENCY_SYNC;
  o.max_round_contributions = absl::GetFlag(FLAGS_max_round_contributions);
  const int apply_threads = absl::GetFlag(FLAGS_apply_threads);
  if (apply_threads < 0 || apply_threads > 256) {
    return absl::InvalidArgumentError("--apply_threads must be in [0, 256]");
  }
  o.apply_threads = static_cast<size_t>(apply_threads);
  return o;
}

// The coordinator shard 0 hosts when --epochs is set; null otherwise.
absl::StatusOr<std::unique_ptr<spotps::Coordinator>> CoordinatorFromFlags(uint32_t shard_index) {
  const int64_t min_workers = absl::GetFlag(FLAGS_min_workers);
  if (min_workers < 0 || min_workers > absl::GetFlag(FLAGS_max_workers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min_workers=", min_workers, " must be in [0, --max_workers]"));
  }
  if (absl::GetFlag(FLAGS_epochs) == 0) {
    if (shard_index == 0 && min_workers > 1) {
      return absl::InvalidArgumentError(
          "--min_workers gates the coordinator's first units: it needs --epochs");
    }
    return nullptr;
  }
  if (shard_index != 0) {
    return absl::InvalidArgumentError("only shard 0 hosts the coordinator (--epochs)");
  }
  spotps::CoordinatorOptions o;
  o.dispatch.num_epochs = absl::GetFlag(FLAGS_epochs);
  o.dispatch.units_per_epoch = absl::GetFlag(FLAGS_units_per_epoch);
  o.dispatch.seed = absl::GetFlag(FLAGS_data_seed);
  o.dispatch.unit_lease = absl::Seconds(absl::GetFlag(FLAGS_unit_lease_s));
  o.worker_lease = absl::Seconds(absl::GetFlag(FLAGS_worker_lease_s));
  if (!(absl::GetFlag(FLAGS_presence_grace_s) >= 0)) {
    return absl::InvalidArgumentError("--presence_grace_s must be 0 or more");
  }
  o.presence_grace = absl::Seconds(absl::GetFlag(FLAGS_presence_grace_s));
  if (absl::GetFlag(FLAGS_max_workers) < 1) {
    return absl::InvalidArgumentError("--max_workers must be at least 1");
  }
  o.max_workers = static_cast<size_t>(absl::GetFlag(FLAGS_max_workers));
  o.min_workers = static_cast<size_t>(min_workers);
  absl::StatusOr<spotps::Consistency> consistency =
      spotps::ParseConsistency(absl::GetFlag(FLAGS_consistency));
  if (!consistency.ok()) return consistency.status();
  o.consistency = *consistency;
  return spotps::Coordinator::Create(o);
}

// Shard 0's connections to shards 1..n-1, which it needs to drive
// checkpoint rounds or sync rounds; null when it needs none.
absl::StatusOr<std::unique_ptr<spotps::PeerShards>> PeersFromFlags(
    const spotps::ShardOptions& options, bool checkpoints) {
  if (options.shard_index != 0 || !(checkpoints || options.sync_rounds)) return nullptr;
  std::vector<std::string> addresses =
      absl::StrSplit(absl::GetFlag(FLAGS_peers), ',', absl::SkipWhitespace());
  if (addresses.size() + 1 != options.num_shards) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shard 0 with --checkpoint_dir or --consistency=sync needs --peers listing shards 1..%d "
        "in order (got %d)",
        options.num_shards - 1, addresses.size()));
  }
  absl::StatusOr<spotps::ChannelSecurity> security = spotps::PeerSecurityFromFlags();
  if (!security.ok()) return security.status();
  return std::make_unique<spotps::PeerShards>(addresses, *security);
}

// Opens the checkpoint directory; null without --checkpoint_dir.
absl::StatusOr<std::unique_ptr<spotps::ShardCheckpointer>> OpenCheckpointsFromFlags(
    const spotps::ShardStore& store) {
  const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir);
  if (dir.empty()) return nullptr;
  return spotps::ShardCheckpointer::Open(dir, store.options().shard_index,
                                         absl::GetFlag(FLAGS_keep_checkpoints));
}

// Restores the newest checkpoint into the store (and shard 0's data
// progress into the coordinator), while the health service says NOT_SERVING
// and the access gate answers every other call UNAVAILABLE.
absl::Status RestoreCheckpoint(spotps::ShardCheckpointer* checkpointer, spotps::ShardStore* store,
                               spotps::Coordinator* coordinator) {
  if (checkpointer == nullptr) return absl::OkStatus();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> progress = checkpointer->Restore(store);
  if (absl::IsNotFound(progress.status())) {
    std::printf("spotps-ps: no checkpoint in %s; starting empty\n",
                absl::GetFlag(FLAGS_checkpoint_dir).c_str());
    return absl::OkStatus();
  }
  if (!progress.ok()) return progress.status();
  if (coordinator != nullptr && !progress->empty()) {
    if (absl::Status s = coordinator->ImportProgress(*progress); !s.ok()) return s;
  }
  spotps::v1::StatsResponse stats;
  store->FillStats(&stats);
  std::printf("spotps-ps: restored checkpoint %llu (global step %llu) in %.0f ms\n",
              static_cast<unsigned long long>(checkpointer->restored_id()),
              static_cast<unsigned long long>(stats.global_step()),
              absl::ToDoubleMilliseconds(absl::Now() - start));
  return absl::OkStatus();
}

// The --metrics_listen endpoint: /metrics, and on shard 0 the status page.
absl::StatusOr<std::unique_ptr<spotps::HttpEndpoint>> StartMetricsEndpoint(
    spotps::MetricsRegistry* registry, spotps::StatusPage* page,
    spotps::HttpEndpointOptions security) {
  std::map<std::string, spotps::HttpHandler> handlers;
  handlers["/metrics"] = [registry] {
    return spotps::HttpReply{200, "text/plain; version=0.0.4; charset=utf-8", registry->Render()};
  };
  if (page != nullptr) {
    handlers["/"] = [] {
      return spotps::HttpReply{200, "text/html; charset=utf-8", spotps::StatusPage::Html()};
    };
    handlers["/status.json"] = [page] {
      return spotps::HttpReply{200, "application/json", page->Json()};
    };
  }
  return spotps::HttpEndpoint::Start(absl::GetFlag(FLAGS_metrics_listen), std::move(handlers),
                                     std::move(security));
}

}  // namespace

int main(int argc, char** argv) {
  const absl::Time process_start = absl::Now();
  spotps::InstallCrashReport(argv[0]);
  spotps::SetLogProgramName("spotps-ps");
  absl::SetProgramUsageMessage("spotps parameter-server shard");
  spotps::ParseFlagsOrExit(argc, argv);
  const int nice = absl::GetFlag(FLAGS_nice);
  if (nice < 0 || nice > 19) {
    return UsageError(absl::InvalidArgumentError("--nice must be in [0, 19]"));
  }
  // While this is the only thread: every gRPC and apply thread runs at it.
  if (!spotps::CheckFlagsOnly()) spotps::AddNiceValue(nice, "--nice");
  spotps::TuneAllocatorForBulkTransfers();
  absl::StatusOr<spotps::ShardOptions> options = OptionsFromFlags();
  if (!options.ok()) return UsageError(options.status());
  absl::StatusOr<std::unique_ptr<spotps::ShardStore>> store = spotps::ShardStore::Create(*options);
  if (!store.ok()) return UsageError(store.status());

  absl::StatusOr<std::unique_ptr<spotps::Coordinator>> coordinator =
      CoordinatorFromFlags(options->shard_index);
  if (!coordinator.ok()) return UsageError(coordinator.status());

  absl::StatusOr<std::unique_ptr<spotps::PeerShards>> peers =
      PeersFromFlags(*options, !absl::GetFlag(FLAGS_checkpoint_dir).empty());
  if (!peers.ok()) return UsageError(peers.status());
  if (options->sync_rounds && options->shard_index == 0 && *coordinator == nullptr) {
    return UsageError(absl::InvalidArgumentError(
        "--consistency=sync needs shard 0 to coordinate (--epochs): rounds close there"));
  }
  if (const std::string m = absl::GetFlag(FLAGS_metrics_listen); !m.empty()) {
    if (absl::Status s = spotps::HttpEndpoint::CheckListenAddress(m); !s.ok()) {
      return UsageError(
          absl::InvalidArgumentError(absl::StrCat("--metrics_listen: ", s.message())));
    }
  }
  absl::StatusOr<spotps::ShardSecurityOptions> security =
      spotps::ShardSecurityFromFlags(absl::GetFlag(FLAGS_listen));
  if (!security.ok()) return UsageError(security.status());
  absl::StatusOr<spotps::HttpEndpointOptions> metrics_security;
  if (const std::string m = absl::GetFlag(FLAGS_metrics_listen); !m.empty()) {
    metrics_security = spotps::MetricsEndpointSecurity(m, *security);
    if (!metrics_security.ok()) return UsageError(metrics_security.status());
  }
  if (spotps::CheckFlagsOnly()) return spotps::kExitSuccess;

  absl::StatusOr<std::unique_ptr<spotps::ShardCheckpointer>> checkpointer =
      OpenCheckpointsFromFlags(**store);
  if (!checkpointer.ok()) return RuntimeError(checkpointer.status());
  std::unique_ptr<spotps::CheckpointRoundDriver> rounds;
  if (*checkpointer != nullptr && options->shard_index == 0) {
    spotps::CheckpointRoundOptions round_options;
    round_options.every = absl::Seconds(absl::GetFlag(FLAGS_checkpoint_every_s));
    rounds = std::make_unique<spotps::CheckpointRoundDriver>(
        store->get(), checkpointer->get(), coordinator->get(), peers->get(), round_options);
  }
  std::unique_ptr<spotps::SyncRoundDriver> sync_rounds;
  if (options->sync_rounds && options->shard_index == 0) {
    sync_rounds =
        std::make_unique<spotps::SyncRoundDriver>(store->get(), coordinator->get(), peers->get());
  }

  // Trainers' losses and throughput, for the status page (shard 0).
  std::unique_ptr<spotps::TrainingHistory> history;
  std::unique_ptr<spotps::TrainingReportService> report_service;
  spotps::WorkerKeys worker_keys;  // What registered trainers prove themselves with.
  if (*coordinator != nullptr) {
    history = std::make_unique<spotps::TrainingHistory>();
    report_service = std::make_unique<spotps::TrainingReportService>(coordinator->get(),
                                                                     history.get(), &worker_keys);
  }
  spotps::MetricsRegistry metrics_registry;
  std::unique_ptr<spotps::ShardMetrics> metrics;
  std::unique_ptr<spotps::StatusPage> status_page;
  std::unique_ptr<spotps::HttpEndpoint> metrics_endpoint;
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    metrics = std::make_unique<spotps::ShardMetrics>(
        &metrics_registry, store->get(), checkpointer->get(), coordinator->get(), history.get());
    if (options->shard_index == 0) {
      status_page = std::make_unique<spotps::StatusPage>(
          store->get(), checkpointer->get(), coordinator->get(), history.get(), peers->get());
    }
    const bool https = !metrics_security->cert_pem.empty();
    auto endpoint =
        StartMetricsEndpoint(&metrics_registry, status_page.get(), *std::move(metrics_security));
    if (!endpoint.ok()) return RuntimeError(endpoint.status());
    metrics_endpoint = *std::move(endpoint);
    std::printf("spotps-ps: metrics on %s://%s:%d/metrics%s\n", https ? "https" : "http",
                absl::GetFlag(FLAGS_metrics_listen)
                    .substr(0, absl::GetFlag(FLAGS_metrics_listen).rfind(':'))
                    .c_str(),
                metrics_endpoint->port(), status_page != nullptr ? ", status page at /" : "");
  }
  spotps::ParameterServerService service(store->get(), checkpointer->get(), spotps::KernelRandomU64(),
                                         metrics.get());
  std::unique_ptr<spotps::CoordinatorService> coordinator_service;
  const int max_bytes = static_cast<int>(absl::GetFlag(FLAGS_max_message_mb) << 20);
  int port = 0;
  spotps::ShardAccessGate gate(std::move(security->tokens));
  spotps::EnableHealthAndReflection();
  grpc::ServerBuilder builder;
  builder.SetOption(spotps::ServerReflectionV1Option());  // v1 beside gRPC's v1alpha.
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen),
                           spotps::GatedServerCredentials(*security, &gate), &port);
  builder.SetMaxReceiveMessageSize(max_bytes);
  builder.SetMaxSendMessageSize(max_bytes);
  for (const auto& [name, value] : spotps::BulkTransportArgs()) {
    builder.AddChannelArgument(name, value);
  }
  // gRPC sets SO_REUSEPORT by default: a second shard started on the same
  // port would silently share its traffic. Fail loudly instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&service);
  if (*coordinator != nullptr) {
    coordinator_service = std::make_unique<spotps::CoordinatorService>(coordinator->get(),
                                                                       rounds.get(), &worker_keys);
    builder.RegisterService(coordinator_service.get());
    builder.RegisterService(report_service.get());
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return RuntimeError(
        absl::UnavailableError(absl::StrCat("cannot listen on ", absl::GetFlag(FLAGS_listen))));
  }
  gate.SetServing(false, "restoring its checkpoint");
  gate.AttachServer(server.get());
  if (absl::Status s = RestoreCheckpoint(checkpointer->get(), store->get(), coordinator->get());
      !s.ok()) {
    return RuntimeError(s);
  }
  // SIGTERM is handled from before the shard says it is ready (health,
  // port file, the "listening" line): a supervisor that stops it at once
  // gets a clean shutdown, not the default action's exit 143.
  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    std::printf("spotps-ps: shard %u got signal %d, shutting down\n", options->shard_index, signo);
    std::fflush(stdout);
    gate.SetServing(false, "shutting down");
    service.StopWatches();  // Watch streams would otherwise hold the grace period.
    if (coordinator_service != nullptr) coordinator_service->StopAttendance();  // Likewise.
    server->Shutdown(std::chrono::system_clock::now() +
                     std::chrono::seconds(absl::GetFlag(FLAGS_shutdown_grace_s)));
  });
  std::thread signal_thread([&io] { io.run(); });
  gate.SetServing(true);
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    if (absl::Status s = spotps::WriteFileAtomically(path, absl::StrCat(port, "\n")); !s.ok()) {
      io.stop();
      signal_thread.join();
      return RuntimeError(s);
    }
  }
  std::printf(
      "spotps-ps: shard %u/%u listening on port %d (optimizer=%s lr=%g schedule=%s "
      "staleness_method=%s), ready %.0f ms after start\n",
      options->shard_index, options->num_shards, port,
      spotps::DescribeOptimizer(options->optimizer).c_str(), options->schedule.base_lr,
      absl::GetFlag(FLAGS_lr_schedule).c_str(),
      spotps::DescribeStaleness((*store)->staleness()).c_str(),
      absl::ToDoubleMilliseconds(absl::Now() - process_start));
  if (*coordinator != nullptr) {
    std::printf("spotps-ps: coordinator for %u epochs of %llu units (consistency=%s)\n",
                absl::GetFlag(FLAGS_epochs),
                static_cast<unsigned long long>(absl::GetFlag(FLAGS_units_per_epoch)),
                spotps::ConsistencyName((*coordinator)->consistency()).c_str());
  }
  std::fflush(stdout);
  if (rounds != nullptr) rounds->Start();
  if (sync_rounds != nullptr) sync_rounds->Start();

  // Async "avg" and "warmup": tell the store the live workers, and apply
  // held pushes that waited --average_wait_ms (in local mode, longer where
  // rounds are long: ParameterServerService::HeldUpdateWaits). Every shard
  // counts the clients that push to it and have not left or fallen silent,
  // shard 0 too: its registered workers would count a trainer killed
  // without notice until its worker lease ends (updates waiting for it all
  // that while) and a joiner before its first push.
  absl::Notification stop_async_ticks;
  std::thread async_ticks([&] {
    const spotps::StalenessConfig& how = (*store)->staleness();
    if (!how.average && !how.worker_warmup) return;
    const absl::Duration tick =
        std::max(absl::Milliseconds(1), absl::Milliseconds(how.average_wait_ms) / 4);
    absl::Time next_count = absl::InfinitePast();
    while (!stop_async_ticks.WaitForNotificationWithTimeout(tick)) {
      if (absl::Now() >= next_count) {
        (*store)->SetLiveWorkers(service.RecentWorkers());
        next_count = absl::Now() + absl::Milliseconds(100);
      }
      (*store)->ApplyHeldOlderThan(service.HeldUpdateWaits());
    }
  });
  server->Wait();
  stop_async_ticks.Notify();
  async_ticks.join();
  metrics_endpoint.reset();
  sync_rounds.reset();
  rounds.reset();
  io.stop();
  signal_thread.join();
  std::printf("spotps-ps: shard %u stopped\n", options->shard_index);
  return 0;
}
