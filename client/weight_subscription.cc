#include "client/weight_subscription.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/rpc_retry.h"
#include "spotps/v1/parameter_server.grpc.pb.h"

namespace spotps {

// One shard's Watch connection and the call in flight on it, so that Stop
// can cancel it.
struct WeightSubscription::ShardWatch {
  std::string address;
  std::unique_ptr<v1::ParameterServer::Stub> stub;
  absl::Mutex mu;
  grpc::ClientContext* call ABSL_GUARDED_BY(mu) = nullptr;
};

absl::StatusOr<std::unique_ptr<WeightSubscription>> WeightSubscription::Start(
    Cluster* cluster, const SubscriptionOptions& options, Callback on_update) {
  if (cluster == nullptr || !cluster->has_layout()) {
    return absl::FailedPreconditionError("WeightSubscription: the cluster's layout is not known");
  }
  if (options.min_interval < absl::ZeroDuration() ||
      options.stream_duration < absl::Milliseconds(10) ||
      options.initial_backoff <= absl::ZeroDuration() ||
      options.max_backoff < options.initial_backoff) {
    return absl::InvalidArgumentError("WeightSubscription: options out of range");
  }
  if (options.wire_dtype != v1::DTYPE_FP32 && options.wire_dtype != v1::DTYPE_BF16) {
    return absl::InvalidArgumentError("WeightSubscription: bad wire dtype");
  }
  std::unique_ptr<WeightSubscription> sub(
      new WeightSubscription(cluster, options, std::move(on_update)));
  for (size_t i = 0; i < sub->shards_.size(); ++i) {
    sub->threads_.emplace_back([s = sub.get(), i] { s->WatchShard(i); });
  }
  sub->threads_.emplace_back([s = sub.get()] { s->PullLoop(); });
  return sub;
}

WeightSubscription::WeightSubscription(Cluster* cluster, const SubscriptionOptions& options,
                                       Callback on_update)
    : cluster_(cluster), options_(options), on_update_(std::move(on_update)) {
  watched_.assign(cluster->partition_map().partitions().size(), kNoVersion);
  checkpoint_versions_.assign(watched_.size(), kNoVersion);
  checkpoint_ids_.assign(cluster->num_shards(), 0);
  for (size_t i = 0; i < cluster->num_shards(); ++i) {
    auto shard = std::make_unique<ShardWatch>();
    shard->address = cluster->shard_address(i);
    grpc::ChannelArguments args;
    // Its own connection: a pull of the whole model must not queue the
    // notifications behind it.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    shard->stub = v1::ParameterServer::NewStub(
        CreateSecureChannel(shard->address, cluster->security(), args));
    shards_.push_back(std::move(shard));
  }
}

WeightSubscription::~WeightSubscription() { Stop(); }

void WeightSubscription::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& shard : shards_) {
    absl::MutexLock lock(&shard->mu);
    if (shard->call != nullptr) shard->call->TryCancel();
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

std::shared_ptr<const WeightSnapshot> WeightSubscription::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

int64_t WeightSubscription::published() const {
  absl::MutexLock lock(&mu_);
  return published_;
}

bool WeightSubscription::WaitForPublished(int64_t count, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto done = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return published_ > count; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

absl::Status WeightSubscription::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

void WeightSubscription::RecordError(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  last_error_ = status;
}

bool WeightSubscription::SleepUnlessStopped(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  mu_.AwaitWithTimeout(absl::Condition(&stopping), d);
  return !stopping_;
}

uint64_t WeightSubscription::published_checkpoint_id() const {
  absl::MutexLock lock(&mu_);
  return published_checkpoint_id_;
}

WeightSubscription::CheckpointRound WeightSubscription::CommonCheckpoint() const {
  CheckpointRound round;
  const uint64_t id = checkpoint_ids_.front();
  if (id == 0 || std::any_of(checkpoint_ids_.begin(), checkpoint_ids_.end(),
                             [id](uint64_t other) { return other != id; })) {
    return round;
  }
  round.id = id;
  round.versions = checkpoint_versions_;
  return round;
}

bool WeightSubscription::Publishable(const std::vector<uint64_t>& versions,
                                     const CheckpointRound& round) const {
  switch (options_.consistency) {
    case SnapshotConsistency::kAny:
      return true;
    case SnapshotConsistency::kSyncRound:
      return std::all_of(versions.begin(), versions.end(),
                         [&](uint64_t v) { return v == versions.front() && v != kNoVersion; });
    case SnapshotConsistency::kCheckpointRound:
      return round.id != 0 && versions == round.versions &&
             std::find(versions.begin(), versions.end(), kNoVersion) == versions.end();
  }
  return false;
}

void WeightSubscription::WatchShard(size_t i) {
  ShardWatch& shard = *shards_[i];
  absl::Duration backoff = options_.initial_backoff;
  while (true) {
    grpc::ClientContext ctx;
    // The shard ends the stream after max_duration_ms; the deadline only
    // catches a shard that does not.
    ctx.set_deadline(
        absl::ToChronoTime(absl::Now() + options_.stream_duration + absl::Seconds(10)));
    {
      absl::MutexLock lock(&shard.mu);
      absl::MutexLock stop_lock(&mu_);
      if (stopping_) return;
      shard.call = &ctx;
    }
    v1::WatchRequest request;
    request.set_max_duration_ms(
        static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.stream_duration)));
    std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader =
        shard.stub->Watch(&ctx, request);
    v1::WatchResponse response;
    while (reader->Read(&response)) {
      absl::MutexLock lock(&mu_);
      const bool with_checkpoint =
          response.checkpoint_versions_size() == response.partitions_size();
      checkpoint_ids_[i] = with_checkpoint ? response.last_checkpoint_id() : 0;
      for (int k = 0; k < response.partitions_size(); ++k) {
        const uint32_t id = response.partitions(k).partition_id();
        if (id >= watched_.size()) continue;
        watched_[id] = response.partitions(k).version();
        checkpoint_versions_[id] = with_checkpoint ? response.checkpoint_versions(k) : kNoVersion;
      }
      generation_ += 1;
      backoff = options_.initial_backoff;
    }
    const grpc::Status status = reader->Finish();
    {
      absl::MutexLock lock(&shard.mu);
      shard.call = nullptr;
    }
    if (status.ok()) continue;  // The stream ran its course: open the next.
    RecordError(absl::Status(
        static_cast<absl::StatusCode>(status.error_code()),
        absl::StrCat("shard ", i, " (", shard.address, ") Watch: ", status.error_message())));
    if (!SleepUnlessStopped(JitteredBackoff(backoff))) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void WeightSubscription::PullLoop() {
  WeightSnapshot working;
  std::vector<uint64_t> published_versions;
  uint64_t seen = 0;
  absl::Time last_pull = absl::InfinitePast();
  absl::Duration backoff = options_.initial_backoff;
  bool retry = false;  // The last pull failed: pull again without a new report.
  while (true) {
    std::vector<uint64_t> watched;
    CheckpointRound round;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || generation_ != seen || retry;
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      seen = generation_;
      watched = watched_;
      if (options_.consistency == SnapshotConsistency::kCheckpointRound) {
        round = CommonCheckpoint();
        if (round.id == published_checkpoint_id_) round = CheckpointRound();  // Published.
      }
    }
    // Nothing the snapshot lacks, or a state that may not be published (a
    // sync round applied on some shards only, weights that are not a new
    // checkpoint's): wait for the next report.
    // A new checkpoint of unchanged weights is published without new data.
    const bool unchanged = watched == working.versions && round.id == 0;
    if (!retry && (unchanged || !Publishable(watched, round))) continue;
    if (!SleepUnlessStopped(last_pull + options_.min_interval - absl::Now())) return;
    last_pull = absl::Now();
    if (absl::Status s = cluster_->Pull(options_.wire_dtype, &working); !s.ok()) {
      RecordError(s);
      if (!SleepUnlessStopped(JitteredBackoff(backoff))) return;
      backoff = std::min(backoff * 2, options_.max_backoff);
      retry = true;
      continue;
    }
    retry = false;
    backoff = options_.initial_backoff;
    // A round may have been applied on one shard mid-pull; the report of
    // the other shards' part of it brings the loop back here.
    if (!Publishable(working.versions, round)) continue;
    if (working.versions == published_versions &&
        options_.consistency != SnapshotConsistency::kCheckpointRound) {
      continue;
    }
    published_versions = working.versions;
    auto snapshot = std::make_shared<const WeightSnapshot>(working);
    {
      absl::MutexLock lock(&mu_);
      latest_ = snapshot;
      published_ += 1;
      published_checkpoint_id_ = round.id;
    }
    if (on_update_) on_update_(*snapshot);
  }
}

}  // namespace spotps
