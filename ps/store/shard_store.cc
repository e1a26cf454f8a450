#include "ps/store/shard_store.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/tensor_codec.h"

namespace spotps {

struct ShardStore::PartitionState {
  explicit PartitionState(int64_t n, int slots)
      : weights(n), state(slots, std::vector<float>(n, 0.0f)) {}
  explicit PartitionState(PartitionSnapshot&& snapshot)
      : weights(std::move(snapshot.weights)),
        state(std::move(snapshot.optimizer_state)),
        version(snapshot.version) {}
  mutable absl::Mutex mu;
  std::vector<float> weights ABSL_GUARDED_BY(mu);
  std::vector<std::vector<float>> state ABSL_GUARDED_BY(mu);  // Optimizer slots.
  uint64_t version ABSL_GUARDED_BY(mu) = 0;
};

namespace {

StalenessConfig EffectiveStaleness(const ShardOptions& options) {
  StalenessConfig config = options.staleness;
  if (options.staleness_lr_scaling && config.method == StalenessMethod::kNone) {
    config.method = StalenessMethod::kLrScale;
  }
  return config;
}

// The optimizer as configured, its momentum delayed where the staleness
// method asks for it.
OptimizerConfig EffectiveOptimizer(const ShardOptions& options) {
  OptimizerConfig config = options.optimizer;
  config.delayed_momentum = options.staleness.delayed_nesterov;
  return config;
}

void AtomicMax(std::atomic<uint64_t>& target, uint64_t value) {
  uint64_t seen = target.load(std::memory_order_relaxed);
  while (value > seen && !target.compare_exchange_weak(seen, value)) {
  }
}

bool AllFiniteFloats(const std::vector<float>& values) {
  return AllFinite(v1::DTYPE_FP32, absl::string_view(reinterpret_cast<const char*>(values.data()),
                                                     values.size() * sizeof(float)));
}

absl::Status ValidatePartitionSnapshot(const PartitionSnapshot& snapshot, const Partition& p,
                                       int slots) {
  if (snapshot.weights.size() != static_cast<uint64_t>(p.num_elements)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("partition %d has %d weights, the layout gives it %d elements", p.id,
                        snapshot.weights.size(), p.num_elements));
  }
  if (snapshot.optimizer_state.size() != static_cast<size_t>(slots)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("partition %d has %d optimizer state arrays, the state declares %d", p.id,
                        snapshot.optimizer_state.size(), slots));
  }
  for (size_t s = 0; s < snapshot.optimizer_state.size(); ++s) {
    if (snapshot.optimizer_state[s].size() != snapshot.weights.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("optimizer state array %d of partition %d has %d elements, not %d", s,
                          p.id, snapshot.optimizer_state[s].size(), snapshot.weights.size()));
    }
  }
  if (!AllFiniteFloats(snapshot.weights)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("weights of partition %d contain NaN or Inf", p.id));
  }
  for (const std::vector<float>& slot : snapshot.optimizer_state) {
    if (!AllFiniteFloats(slot)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("optimizer state of partition %d contains NaN or Inf", p.id));
    }
  }
  return absl::OkStatus();
}

// ValidateShardState, returning the partition map it checked against.
absl::StatusOr<PartitionMap> ValidatedPartitionMap(const ShardState& state) {
  if (state.shard_index >= state.num_shards) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "state of shard %d does not fit num_shards=%d", state.shard_index, state.num_shards));
  }
  if (state.optimizer_state_slots < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("negative optimizer_state_slots %d", state.optimizer_state_slots));
  }
  absl::StatusOr<PartitionMap> map = PartitionMap::Create(state.layout, state.num_shards);
  if (!map.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the state's layout is unusable: ", map.status().message()));
  }
  std::vector<bool> seen(map->partitions().size(), false);
  for (const PartitionSnapshot& snapshot : state.partitions) {
    const Partition* p = map->Find(snapshot.id);
    if (p == nullptr || p->shard != state.shard_index) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "partition %d is not owned by shard %d of %d under this layout (%s)", snapshot.id,
          state.shard_index, state.num_shards, state.layout.Summary()));
    }
    if (seen[snapshot.id]) {
      return absl::InvalidArgumentError(absl::StrFormat("partition %d appears twice", snapshot.id));
    }
    seen[snapshot.id] = true;
    if (absl::Status s = ValidatePartitionSnapshot(snapshot, *p, state.optimizer_state_slots);
        !s.ok()) {
      return s;
    }
  }
  for (uint32_t id : map->PartitionsOfShard(state.shard_index)) {
    if (!seen[id]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("partition %d (owned by shard %d) is missing", id, state.shard_index));
    }
  }
  return map;
}

absl::Status ValidateRecentPushIds(const ShardState& state) {
  if (state.recent_push_ids.size() > kMaxRecentPushIdsInState) {
    return absl::InvalidArgumentError(
        absl::StrFormat("state lists %d recent push ids, at most %d are allowed",
                        state.recent_push_ids.size(), kMaxRecentPushIdsInState));
  }
  for (const std::string& id : state.recent_push_ids) {
    if (id.empty() || id.size() > kMaxPushIdLength) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "state lists a push id of %d bytes; push ids have 1 to %d", id.size(), kMaxPushIdLength));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateShardState(const ShardState& state) {
  if (absl::Status s = ValidateRecentPushIds(state); !s.ok()) return s;
  return ValidatedPartitionMap(state).status();
}

absl::StatusOr<std::unique_ptr<ShardStore>> ShardStore::Create(const ShardOptions& options) {
  if (options.num_shards == 0 || options.num_shards > PartitionMap::kMaxShards ||
      options.shard_index >= options.num_shards) {
    return absl::InvalidArgumentError(absl::StrFormat("shard_index %d is not in [0, num_shards=%d)",
                                                      options.shard_index, options.num_shards));
  }
  if (absl::Status s = ValidateStalenessConfig(options.staleness,
                                               options.optimizer.kind == OptimizerKind::kAdamW);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateOptimizerConfig(EffectiveOptimizer(options)); !s.ok()) return s;
  absl::StatusOr<LearningRateSchedule> schedule = LearningRateSchedule::Create(options.schedule);
  if (!schedule.ok()) return schedule.status();
  if (options.remembered_push_ids == 0) {
    return absl::InvalidArgumentError("remembered_push_ids must be > 0");
  }
  if (options.sync_rounds && options.staleness.average) {
    return absl::InvalidArgumentError(
        "--staleness_method=...+avg is for async mode: sync mode averages whole rounds already");
  }
  if (options.sync_rounds && options.max_round_contributions == 0) {
    return absl::InvalidArgumentError("max_round_contributions must be > 0 in sync mode");
  }
  return std::unique_ptr<ShardStore>(new ShardStore(options, *std::move(schedule)));
}

ShardStore::ShardStore(const ShardOptions& options, LearningRateSchedule schedule)
    : options_(options),
      schedule_(std::move(schedule)),
      optimizer_(EffectiveOptimizer(options)),
      staleness_(EffectiveStaleness(options)),
      recent_push_ids_(options.remembered_push_ids),
      lanes_(options.apply_threads),
      policy_(
          MakeUpdatePolicy(UpdatePolicyConfig{staleness_, optimizer_.config(), options.sync_rounds,
                                              options.max_round_contributions},
                           *this)) {}

ShardStore::~ShardStore() = default;

absl::Status ShardStore::RequireInitialized() const {
  if (initialized()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "model is not initialised on this shard: a trainer must call Init first");
}

absl::StatusOr<const ShardStore::PartitionState*> ShardStore::Owned(uint32_t id) const {
  if (absl::Status s = RequireInitialized(); !s.ok()) return s;
  const Partition* p = map_.Find(id);
  if (p == nullptr) {
    return absl::NotFoundError(absl::StrFormat("partition %d does not exist (the model has %d)", id,
                                               map_.partitions().size()));
  }
  if (p->shard != options_.shard_index) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "partition %d belongs to shard %d, this is shard %d", id, p->shard, options_.shard_index));
  }
  return partitions_[id].get();
}

const std::vector<uint32_t>& ShardStore::owned_partitions() const {
  return map_.PartitionsOfShard(options_.shard_index);
}

int64_t ShardStore::owned_elements() const { return map_.ShardElements(options_.shard_index); }

absl::Status ShardStore::CheckAnnounced(const AnnouncedElements& announced) const {
  if (absl::Status s = RequireInitialized(); !s.ok()) return s;
  if (announced.empty()) {
    return absl::InvalidArgumentError(
        "push announces no partitions: its first message must list each partition it carries "
        "with its number of elements (PushRequest.announced)");
  }
  for (const auto& [id, n] : announced) {
    if (absl::StatusOr<const PartitionState*> p = Owned(id); !p.ok()) return p.status();
    const int64_t size = map_.partitions()[id].num_elements;
    if (n == 0 || n > static_cast<uint64_t>(size)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("push announces %d elements of partition %d, which has %d", n, id, size));
    }
  }
  return absl::OkStatus();
}

absl::Status ShardStore::ValidateRanges(const std::vector<PayloadRange>& ranges, v1::DType dtype,
                                        const PartitionMap& map, bool require_full_cover,
                                        float max_abs, const AnnouncedElements* announced) const {
  // Valid chunks that fall short of the announcement mean the stream was cut
  // off: gRPC ends it the same way at a message it cannot parse as at its
  // end, so the message names both.
  auto carried_other_than_announced = [](uint32_t id, uint64_t promised, uint64_t carried) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "push announced %d elements of partition %d but carried %d%s", promised, id, carried,
        carried < promised ? " (its stream ended early, or at a message that does not parse)"
                           : ""));
  };
  const size_t width = WireBytesPerElement(dtype);
  if (width == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unsupported payload dtype %d (expected DTYPE_FP32 or DTYPE_BF16)", dtype));
  }
  for (const PayloadRange& r : ranges) {
    const Partition* p = map.Find(r.partition_id);
    if (p == nullptr) {
      return absl::NotFoundError(absl::StrFormat("partition %d does not exist (the model has %d)",
                                                 r.partition_id, map.partitions().size()));
    }
    if (p->shard != options_.shard_index) {
      return absl::InvalidArgumentError(
          absl::StrFormat("partition %d belongs to shard %d, this is shard %d", r.partition_id,
                          p->shard, options_.shard_index));
    }
    if (announced != nullptr && announced->count(r.partition_id) == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "push carries partition %d, which its first message did not announce", r.partition_id));
    }
    if (r.bytes.empty() || r.bytes.size() % width != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "chunk for partition %d at offset %d has %d bytes: not a positive multiple of %d (%s)",
          r.partition_id, r.offset, r.bytes.size(), width, v1::DType_Name(dtype)));
    }
    const uint64_t n = r.bytes.size() / width;
    if (r.offset > static_cast<uint64_t>(p->num_elements) ||
        r.offset + n > static_cast<uint64_t>(p->num_elements)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("chunk of %d elements at offset %d overruns partition %d of %d elements",
                          n, r.offset, r.partition_id, p->num_elements));
    }
    const bool checked = r.within_gradient_bound && max_abs == kMaxGradientMagnitude;
    if (!checked && !AllWithin(dtype, r.bytes, max_abs)) {
      const std::string bound =
          max_abs < std::numeric_limits<float>::max()
              ? absl::StrFormat(", or an element beyond %g in magnitude", max_abs)
              : "";
      return absl::InvalidArgumentError(
          absl::StrFormat("payload for partition %d at offset %d contains NaN or Inf%s",
                          r.partition_id, r.offset, bound));
    }
  }
  const auto groups = GroupByPartition(ranges);
  for (const auto& [id, group] : groups) {
    uint64_t covered_to = 0;
    uint64_t covered = 0;
    for (const PayloadRange* r : group) {
      if (r->offset < covered_to) {
        return absl::InvalidArgumentError(
            absl::StrFormat("overlapping chunks for partition %d at offset %d", id, r->offset));
      }
      covered_to = r->offset + r->bytes.size() / width;
      covered += r->bytes.size() / width;
    }
    if (require_full_cover && covered != static_cast<uint64_t>(map.Find(id)->num_elements)) {
      return absl::InvalidArgumentError(absl::StrFormat("partition %d has %d of its %d elements",
                                                        id, covered, map.Find(id)->num_elements));
    }
    if (announced == nullptr) continue;
    if (const uint64_t promised = announced->at(id); covered != promised) {
      return carried_other_than_announced(id, promised, covered);
    }
  }
  if (announced != nullptr) {
    for (const auto& [id, promised] : *announced) {
      if (groups.count(id) == 0) return carried_other_than_announced(id, promised, 0);
    }
  }
  if (require_full_cover) {
    for (uint32_t id : map.PartitionsOfShard(options_.shard_index)) {
      if (groups.count(id) == 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("values for partition %d (owned by this shard) are missing", id));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ShardStore::Init(const ModelLayout& layout,
                                      const std::vector<PayloadRange>& values,
                                      absl::string_view init_id) {
  absl::MutexLock lock(&init_mu_);
  if (absl::StatusOr<bool> takes = TakesInit(layout); !takes.ok() || !*takes) return takes;
  absl::StatusOr<PartitionMap> map = PartitionMap::Create(layout, options_.num_shards);
  if (!map.ok()) return map.status();
  if (absl::Status s =
          ValidateRanges(values, v1::DTYPE_FP32, *map, true, std::numeric_limits<float>::max());
      !s.ok()) {
    return s;
  }

  std::vector<std::unique_ptr<PartitionState>> partitions(map->partitions().size());
  for (uint32_t id : map->PartitionsOfShard(options_.shard_index)) {
    partitions[id] = std::make_unique<PartitionState>(map->partitions()[id].num_elements,
                                                      optimizer_.state_slots());
  }
  for (const PayloadRange& r : values) {
    PartitionState& p = *partitions[r.partition_id];
    absl::MutexLock plock(&p.mu);  // Uncontended; keeps the annotations honest.
    DecodeToFp32(v1::DTYPE_FP32, r.bytes, r.bytes.size() / 4, p.weights.data() + r.offset)
        .IgnoreError();  // Sizes were validated.
  }
  kept_init_id_ = std::string(init_id);
  Publish(layout, *std::move(map), std::move(partitions));
  return true;
}

bool ShardStore::KeptInit(absl::string_view init_id) const {
  absl::MutexLock lock(&init_mu_);
  return !init_id.empty() && initialized() && init_id == kept_init_id_;
}

absl::StatusOr<bool> ShardStore::TakesInit(const ModelLayout& layout) const {
  if (!initialized()) return true;
  // layout_ is written once, before initialized_ is published.
  if (layout.fingerprint() == layout_.fingerprint()) return false;
  return absl::FailedPreconditionError(absl::StrCat("shard already holds a different model (",
                                                    layout_.Summary(), "); refusing init with ",
                                                    layout.Summary()));
}

void ShardStore::Publish(const ModelLayout& layout, PartitionMap map,
                         std::vector<std::unique_ptr<PartitionState>> partitions) {
  layout_ = layout;
  map_ = std::move(map);
  partitions_ = std::move(partitions);
  initialized_.store(true, std::memory_order_release);
}

absl::StatusOr<ShardState> ShardStore::ExportState() const {
  if (absl::Status s = RequireInitialized(); !s.ok()) return s;
  ShardState state;
  state.layout = layout_;
  state.shard_index = options_.shard_index;
  state.num_shards = options_.num_shards;
  state.optimizer_state_slots = optimizer_.state_slots();
  state.partitions.reserve(owned_partitions().size());
  policy_->WhileNoUpdate([&] {
    for (uint32_t id : owned_partitions()) {
      const PartitionState& p = *partitions_[id];
      const int64_t n = map_.partitions()[id].num_elements;
      PartitionSnapshot& snapshot = state.partitions.emplace_back();
      snapshot.id = id;
      // Allocated (and faulted in) before locking, so a push waits only for
      // the copy itself.
      snapshot.weights.resize(n);
      snapshot.optimizer_state.assign(state.optimizer_state_slots, std::vector<float>(n));
      absl::ReaderMutexLock lock(&p.mu);
      snapshot.version = p.version;
      std::copy(p.weights.begin(), p.weights.end(), snapshot.weights.begin());
      for (size_t s = 0; s < p.state.size(); ++s) {
        std::copy(p.state[s].begin(), p.state[s].end(), snapshot.optimizer_state[s].begin());
      }
    }
    state.global_step = global_step_.load();
    // Held pushes are not in the weights: leave their ids out, so the
    // state's ids are exactly those of pushes it holds.
    state.recent_push_ids = recent_push_ids_.Snapshot();
    policy_->DropHeld(&state.recent_push_ids);
  });
  return state;
}

absl::Status ShardStore::ImportState(const ShardState& state) {
  return ImportState(ShardState(state));
}

absl::Status ShardStore::ImportState(ShardState&& state) {
  absl::MutexLock lock(&init_mu_);
  if (initialized()) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard already holds a model (", layout_.Summary(),
                     "); a state can only be imported into a fresh shard"));
  }
  if (state.shard_index != options_.shard_index || state.num_shards != options_.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrFormat("state is of shard %d of %d, this is shard %d of %d", state.shard_index,
                        state.num_shards, options_.shard_index, options_.num_shards));
  }
  if (state.optimizer_state_slots != optimizer_.state_slots()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "state has %d optimizer state slots, this shard's optimizer uses %d (another optimizer "
        "or momentum setting?)",
        state.optimizer_state_slots, optimizer_.state_slots()));
  }
  if (absl::Status s = ValidateRecentPushIds(state); !s.ok()) return s;
  absl::StatusOr<PartitionMap> map = ValidatedPartitionMap(state);
  if (!map.ok()) return map.status();

  std::vector<std::unique_ptr<PartitionState>> partitions(map->partitions().size());
  for (PartitionSnapshot& snapshot : state.partitions) {
    const uint32_t id = snapshot.id;
    partitions[id] = std::make_unique<PartitionState>(std::move(snapshot));
  }
  global_step_.store(state.global_step);
  for (const std::string& id : state.recent_push_ids) recent_push_ids_.Insert(id);
  Publish(state.layout, *std::move(map), std::move(partitions));
  return absl::OkStatus();
}

absl::Status ShardStore::CheckBaseVersions(const std::vector<PayloadRange>& ranges,
                                           bool current_only) const {
  for (const auto& [id, group] : GroupByPartition(ranges)) {
    const uint64_t base = group.front()->version;
    for (const PayloadRange* r : group) {
      if (r->version != base) {
        return absl::InvalidArgumentError(
            absl::StrFormat("chunks for partition %d carry different base versions (%d and %d)", id,
                            base, r->version));
      }
    }
    const PartitionState& p = *partitions_[id];
    uint64_t current;
    {
      absl::ReaderMutexLock lock(&p.mu);
      current = p.version;
    }
    if (base > current) {
      return absl::OutOfRangeError(absl::StrFormat(
          "push for partition %d is based on version %d but the partition is at version %d "
          "(a version from the future: pull again)",
          id, base, current));
    }
    if (current_only && base != current) {
      return absl::AbortedError(absl::StrFormat(
          "push for partition %d is based on version %d, but round %d was applied since (sync "
          "mode takes gradients of the current version only): pull and compute again",
          id, base, current));
    }
    if (options_.max_staleness >= 0 &&
        current - base > static_cast<uint64_t>(options_.max_staleness)) {
      return absl::AbortedError(absl::StrFormat(
          "push for partition %d is %d versions stale (based on %d, partition at %d), more than "
          "--max_staleness=%d: pull fresh weights and recompute",
          id, current - base, base, current, options_.max_staleness));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PushOutcome> ShardStore::Push(absl::string_view push_id, v1::DType dtype,
                                             const std::vector<PayloadRange>& ranges,
                                             const AnnouncedElements* announced,
                                             float gradient_scale, const PushSender& sender) {
  auto reject = [this](absl::Status s) {
    pushes_rejected_.fetch_add(1, std::memory_order_relaxed);
    if (absl::IsAborted(s)) pushes_too_stale_.fetch_add(1, std::memory_order_relaxed);
    return s;
  };
  if (absl::Status s = RequireInitialized(); !s.ok()) return reject(s);
  if (push_id.empty() || push_id.size() > kMaxPushIdLength) {
    return reject(absl::InvalidArgumentError(absl::StrFormat(
        "push_id must have 1 to %d bytes, got %d", kMaxPushIdLength, push_id.size())));
  }
  if (ranges.empty()) return reject(absl::InvalidArgumentError("push carries no gradient"));
  if (!(gradient_scale > 0.0f && gradient_scale <= 1.0f)) {  // NaN fails both.
    return reject(absl::InvalidArgumentError(absl::StrFormat(
        "push's gradient_scale is %g: it must be finite, above 0 and at most 1", gradient_scale)));
  }
  // A sync round averages whole gradients, so each must cover the shard.
  if (absl::Status s = ValidateRanges(ranges, dtype, map_, options_.sync_rounds,
                                      kMaxGradientMagnitude, announced);
      !s.ok()) {
    return reject(s);
  }
  absl::StatusOr<PushOutcome> taken = policy_->Take(push_id, dtype, ranges, gradient_scale, sender);
  if (!taken.ok()) return reject(taken.status());
  return taken;
}

AsyncView ShardStore::View(uint64_t staleness, uint64_t updates_done) const {
  AsyncView view;
  view.staleness = staleness;
  view.mean_staleness = recent_staleness();
  view.live_workers = live_workers_.load(std::memory_order_relaxed);
  view.updates_done = updates_done;
  return view;
}

void ShardStore::ObserveStaleness(uint64_t staleness) {
  staleness_sum_.fetch_add(staleness, std::memory_order_relaxed);
  staleness_count_.fetch_add(1, std::memory_order_relaxed);
  AtomicMax(staleness_max_, staleness);
  // An exponential mean over ~32 observations; a lost race drops one.
  const double old = recent_staleness_.load(std::memory_order_relaxed);
  recent_staleness_.store(old + (static_cast<double>(staleness) - old) / 32.0,
                          std::memory_order_relaxed);
}

size_t ShardStore::held_pushes() const { return policy_->held_pushes(); }

void ShardStore::SetLiveWorkers(int n) {
  const int before = live_workers_.exchange(n, std::memory_order_relaxed);
  if (n < before && initialized()) policy_->ApplyHeldIfComplete();
}

void ShardStore::StopCounting(absl::string_view worker, int live) {
  // Before k falls, or the fall could complete an update with its push.
  if (initialized()) policy_->StopCounting(worker);
  SetLiveWorkers(live);
}

bool ShardStore::ApplyHeldOlderThan(const AveragingWaits& waits) {
  return initialized() && policy_->ApplyHeldOlderThan(waits);
}

bool ShardStore::WaitForAveragedUpdate(uint64_t update, absl::Time deadline) const {
  return policy_->WaitForAveragedUpdate(update, deadline);
}

absl::StatusOr<RoundOutcome> ShardStore::ApplyRound(const std::vector<std::string>& push_ids) {
  if (absl::Status s = RequireInitialized(); !s.ok()) return s;
  return policy_->ApplyRound(push_ids);
}

PartitionUpdate ShardStore::UpdatePartition(
    uint32_t id, uint64_t base_version, const std::vector<GradientRun>& runs,
    const std::function<StalenessStep(uint64_t staleness)>& plan) {
  PartitionState& p = *partitions_[id];
  absl::MutexLock lock(&p.mu);
  PartitionUpdate update;
  update.staleness = p.version > base_version ? p.version - base_version : 0;
  const StalenessStep how = plan(update.staleness);
  update.version = p.version += 1;
  float* state[2] = {nullptr, nullptr};
  for (const GradientRun& run : runs) {
    for (size_t s = 0; s < p.state.size(); ++s) state[s] = p.state[s].data() + run.offset;
    optimizer_.Apply(p.weights.data() + run.offset, state, run.gradient, run.n,
                     static_cast<float>(how.lr), p.version, how.compensation, how.beta1,
                     how.momentum_phase, how.round_share);
  }
  return update;
}

absl::StatusOr<uint64_t> ShardStore::Read(uint32_t id, v1::DType dtype, std::string* out) const {
  return ReadTo(id, dtype, [&](uint64_t) {
    out->resize(map_.partitions()[id].num_elements * WireBytesPerElement(dtype));
    return out->data();
  });
}

absl::StatusOr<uint64_t> ShardStore::ReadTo(
    uint32_t id, v1::DType dtype, const std::function<char*(uint64_t version)>& place) const {
  absl::StatusOr<const PartitionState*> p = Owned(id);
  if (!p.ok()) return p.status();
  const size_t width = WireBytesPerElement(dtype);
  if (width == 0) return absl::InvalidArgumentError("unsupported pull dtype");
  absl::ReaderMutexLock lock(&(*p)->mu);
  char* out = place((*p)->version);
  EncodeFp32((*p)->weights.data(), static_cast<int64_t>((*p)->weights.size()), dtype, out);
  return (*p)->version;
}

bool ShardStore::WaitForVersion(uint32_t id, uint64_t min_version, absl::Time deadline) const {
  absl::StatusOr<const PartitionState*> p = Owned(id);
  if (!p.ok()) return false;
  const PartitionState& partition = **p;
  auto reached = [&partition, min_version]()
                     ABSL_NO_THREAD_SAFETY_ANALYSIS { return partition.version >= min_version; };
  // The writer that moves the version evaluates the condition as it unlocks.
  const bool ok = partition.mu.ReaderLockWhenWithDeadline(absl::Condition(&reached), deadline);
  partition.mu.ReaderUnlock();
  return ok;
}

absl::StatusOr<uint64_t> ShardStore::Version(uint32_t id) const {
  absl::StatusOr<const PartitionState*> p = Owned(id);
  if (!p.ok()) return p.status();
  absl::ReaderMutexLock lock(&(*p)->mu);
  return (*p)->version;
}

uint64_t ShardStore::CurrentVersion(uint32_t id) const {
  const PartitionState& p = *partitions_[id];
  absl::ReaderMutexLock lock(&p.mu);
  return p.version;
}

double ShardStore::LearningRateNow() const { return schedule_.At(global_step_.load()); }

void ShardStore::CountPull(int64_t bytes_out) {
  pulls_.fetch_add(1, std::memory_order_relaxed);
  bytes_out_.fetch_add(bytes_out, std::memory_order_relaxed);
}

void ShardStore::CountPushBytes(int64_t bytes_in) {
  bytes_in_.fetch_add(bytes_in, std::memory_order_relaxed);
}

void ShardStore::FillStats(v1::StatsResponse* stats) const {
  stats->set_initialized(initialized());
  stats->set_shard_index(options_.shard_index);
  stats->set_num_shards(options_.num_shards);
  stats->set_global_step(global_step_.load());
  stats->set_pushes_applied(pushes_applied_.load());
  stats->set_pushes_duplicate(pushes_duplicate_.load());
  stats->set_pushes_rejected(pushes_rejected_.load());
  stats->set_pushes_too_stale(pushes_too_stale_.load());
  stats->set_pulls(pulls_.load());
  stats->set_bytes_in(bytes_in_.load());
  stats->set_bytes_out(bytes_out_.load());
  const uint64_t count = staleness_count_.load();
  stats->set_mean_staleness(count == 0 ? 0.0 : static_cast<double>(staleness_sum_.load()) / count);
  stats->set_max_staleness(staleness_max_.load());
  stats->set_learning_rate(LearningRateNow());
  stats->set_sync(options_.sync_rounds);
  stats->set_staleness_method(options_.sync_rounds ? "sync" : DescribeStaleness(staleness_));
  stats->set_compute_on_fresh_weights(staleness_.fresh);
  policy_->FillStats(stats);
  if (!initialized()) return;
  for (uint32_t id : owned_partitions()) {
    v1::PartitionStats* ps = stats->add_partitions();
    ps->set_partition_id(id);
    ps->set_version(*Version(id));
    ps->set_num_elements(map_.partitions()[id].num_elements);
  }
}

}  // namespace spotps
