// ShardStore: the partitions one shard owns, with FP32 master weights,
// optimizer state and a version per partition.
#ifndef SPOTPS_PS_STORE_SHARD_STORE_H_
#define SPOTPS_PS_STORE_SHARD_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/model_layout.h"
#include "common/partition_map.h"
#include "ps/store/learning_rate_schedule.h"
#include "ps/store/optimizer.h"
#include "ps/store/partition_lanes.h"
#include "ps/store/payload_range.h"
#include "ps/store/recent_push_ids.h"
#include "ps/store/staleness_method.h"
#include "ps/store/update_policy.h"
#include "spotps/v1/parameter_server.pb.h"

namespace spotps {

struct ShardOptions {
  uint32_t shard_index = 0;
  uint32_t num_shards = 1;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  // Scale each push's learning rate by 1 / (1 + staleness); the same as
  // staleness.method = kLrScale (kept for existing callers).
  bool staleness_lr_scaling = false;
  // What async mode does about stale gradients (staleness_method.h).
  StalenessConfig staleness;
  // Refuse pushes staler than this many versions; negative: no bound.
  int64_t max_staleness = -1;
  size_t remembered_push_ids = size_t{1} << 16;
  // Sync mode (--consistency=sync): pushes are held for the open round and
  // applied together by ApplyRound; at most this many are held at once.
  bool sync_rounds = false;
  size_t max_round_contributions = 64;
  // Threads that apply one update's partitions side by side; 0: one per
  // core, at most 8 (partition_lanes.h).
  size_t apply_threads = 0;
};

// One owned partition's complete training state, copied out of a shard or
// into one.
struct PartitionSnapshot {
  uint32_t id = 0;
  uint64_t version = 0;
  std::vector<float> weights;
  // ShardState::optimizer_state_slots arrays, each of weights.size() floats
  // (AdamW: m then v; SGD with momentum: the momentum buffer).
  std::vector<std::vector<float>> optimizer_state;
};

// Everything a shard needs to resume training where it left off: its model,
// its place among the shards, the update count that drives the learning
// rate, and every owned partition. Push ids and statistics are not part of it.
struct ShardState {
  ModelLayout layout;
  uint32_t shard_index = 0;
  uint32_t num_shards = 0;
  uint64_t global_step = 0;
  int optimizer_state_slots = 0;
  std::vector<PartitionSnapshot> partitions;  // Exported in ascending id order.
  // The ids of the last pushes applied, oldest first: exactly pushes whose
  // updates the partitions hold, so a retry after a restore is a duplicate.
  std::vector<std::string> recent_push_ids;
};

// Checks that `state` is self-consistent: a non-empty layout that cuts into a
// PartitionMap for num_shards, exactly the partitions of shard_index (each
// once, any order) with the map's element counts, optimizer_state_slots arrays
// per partition, only finite values, and at most kMaxRecentPushIdsInState
// well-formed push ids. INVALID_ARGUMENT otherwise.
inline constexpr size_t kMaxRecentPushIdsInState = size_t{1} << 20;
absl::Status ValidateShardState(const ShardState& state);

// Owns the shard's partitions and applies gradients to them. Promises:
// every request is fully validated before it changes anything; a partition
// is read and written under its own lock, so pushes to different partitions
// run in parallel and a read sees one version; a push id is applied at most
// once among the last `remembered_push_ids`; the first valid Init wins. In
// sync mode versions move only by whole rounds: a push must cover every
// owned partition at its current version, and is held until ApplyRound.
// When a push is applied, and with what, is its UpdatePolicy's (the
// consistency mode's) to say.
class ShardStore : private UpdateTarget {
 public:
  static absl::StatusOr<std::unique_ptr<ShardStore>> Create(const ShardOptions& options);
  ~ShardStore();

  // Takes the initial FP32 values of every partition this shard owns. Returns
  // true if applied, false if the same layout was already initialised (these
  // values are ignored); FAILED_PRECONDITION for a different layout.
  // `init_id` (the client's, may be empty) is kept with the values applied.
  absl::StatusOr<bool> Init(const ModelLayout& layout, const std::vector<PayloadRange>& values,
                            absl::string_view init_id = {});
  // True if this shard's values came from an Init with this non-empty
  // init_id: a client's retry of an Init that landed learns it was kept.
  bool KeptInit(absl::string_view init_id) const;
  // What Init(layout, ...) would answer before its values are looked at:
  // true if it would be applied, false if this layout is already initialised,
  // FAILED_PRECONDITION if a different one is. Lets a stream be refused
  // before its values arrive.
  absl::StatusOr<bool> TakesInit(const ModelLayout& layout) const;

  // Applies one gradient (BF16 or FP32 payload ranges) with the optimizer;
  // in sync mode holds it for the open round instead (ABORTED if it was
  // computed before the last round was applied). With `announced`, the
  // ranges must cover exactly the announced elements of exactly the
  // announced partitions (INVALID_ARGUMENT otherwise): a stream cut short
  // is refused even where each of its chunks is valid. The update uses the
  // gradient times `gradient_scale`, which must be finite and in (0, 1]
  // (PushRequest.gradient_scale; INVALID_ARGUMENT otherwise).
  // `sender`: the worker that pushed, which StopCounting may name later,
  // and whether this is the first push of a worker that SetLiveWorkers has
  // just started to count. "fresh" holds such a push for the update after
  // the one open, if that one holds pushes already (averaged_updates.h
  // says why).
  absl::StatusOr<PushOutcome> Push(absl::string_view push_id, v1::DType dtype,
                                   const std::vector<PayloadRange>& ranges,
                                   const AnnouncedElements* announced = nullptr,
                                   float gradient_scale = 1.0f, const PushSender& sender = {});
  // Checks a push's announcement before its payload is read: every id is a
  // partition this shard owns, with 1 to its size elements, and at least one
  // is announced. NOT_FOUND or INVALID_ARGUMENT otherwise.
  absl::Status CheckAnnounced(const AnnouncedElements& announced) const;

  // Sync mode: applies the mean of the held pushes `push_ids` as one update
  // of every owned partition and drops every held push. FAILED_PRECONDITION
  // outside sync mode, INVALID_ARGUMENT for a bad id list, NOT_FOUND when a
  // named push is not held (lost in a restart): nothing changes then.
  absl::StatusOr<RoundOutcome> ApplyRound(const std::vector<std::string>& push_ids);

  // Encodes partition `id` as `dtype` into *out (replacing its contents)
  // and returns the version it was read at.
  absl::StatusOr<uint64_t> Read(uint32_t id, v1::DType dtype, std::string* out) const;
  // Same, into the buffer `place(version)` returns, which must hold the
  // partition's elements in `dtype` (the caller sizes it from
  // partition_map()). `place` runs under the partition's reader lock, so it
  // learns the version the bytes are read at before they are written.
  absl::StatusOr<uint64_t> ReadTo(uint32_t id, v1::DType dtype,
                                  const std::function<char*(uint64_t version)>& place) const;
  absl::StatusOr<uint64_t> Version(uint32_t id) const;
  // Waits until partition `id` (owned) is at `min_version` or later, or
  // `deadline`; returns whether it is.
  bool WaitForVersion(uint32_t id, uint64_t min_version, absl::Time deadline) const;

  bool initialized() const { return initialized_.load(std::memory_order_acquire); }
  // Valid once initialized().
  const ModelLayout& layout() const { return layout_; }
  const PartitionMap& partition_map() const override { return map_; }
  const std::vector<uint32_t>& owned_partitions() const override;
  int64_t owned_elements() const;

  // Copies the shard's state. Each partition is copied under its reader lock,
  // one at a time, so each is at one version and pushes wait for at most one
  // partition copy; different partitions may be at different versions unless
  // the caller has paused pushes. global_step is read after the copies, so it
  // counts at least every push whose effect is in them. FAILED_PRECONDITION
  // before the model is initialised.
  absl::StatusOr<ShardState> ExportState() const;

  // Initialises the store from an exported state (weights, optimizer state,
  // versions and global_step). FAILED_PRECONDITION if the store is already
  // initialised; INVALID_ARGUMENT if the state belongs to another shard index
  // or shard count, uses another number of optimizer state slots, or fails
  // ValidateShardState. Everything is checked before anything changes.
  absl::Status ImportState(const ShardState& state);
  // Same, moving the arrays instead of copying them.
  absl::Status ImportState(ShardState&& state);

  const ShardOptions& options() const { return options_; }
  // The staleness method in force (options().staleness, or kLrScale for
  // staleness_lr_scaling).
  const StalenessConfig& staleness() const { return staleness_; }
  double LearningRateNow() const;
  // Async "avg" (staleness_method.h): applies the held pushes as one
  // averaged update if the oldest has waited at least its wait in `waits`
  // (`age`: any update's). Returns whether it applied one. The shard calls
  // it periodically, so a held push waits at most about average_wait_ms
  // even when no other push comes.
  bool ApplyHeldOlderThan(const AveragingWaits& waits);
  bool ApplyHeldOlderThan(absl::Duration age) { return ApplyHeldOlderThan({age, age}); }
  // "avg": waits until the averaged update numbered `update`
  // (PushOutcome::average_update) is applied, or `deadline`; returns whether
  // it is. Averaged updates are applied in the order of their numbers.
  bool WaitForAveragedUpdate(uint64_t update, absl::Time deadline) const;
  // The live workers (spotps-ps counts them every 100 ms: the clients
  // pushing to the shard that have not left or fallen silent); 0: unknown,
  // which "avg" takes as one. Sizes "avg"'s k and "warmup"'s length. When
  // it falls, a held update that has every remaining worker's push is
  // applied at once rather than after its wait.
  void SetLiveWorkers(int n);
  // `worker` no longer counts (it left, or its client broke off), and the
  // live workers are now `live`: its held pushes stay in their update but
  // no longer count toward the pushes that complete it, so that the update
  // still waits for every remaining worker's push, on every shard alike.
  void StopCounting(absl::string_view worker, int live);
  // Pushes held for the next averaged update.
  size_t held_pushes() const;
  // Running mean staleness (exponential, over the last ~32 partition updates).
  double recent_staleness() const { return recent_staleness_.load(std::memory_order_relaxed); }
  // Updates applied (pushes, or rounds in sync mode). Bumped before the
  // partitions' versions move, so a reader that sees it change may still
  // read some old versions.
  uint64_t global_step() const override { return global_step_.load(); }
  // Fills the counters and partition versions of a Stats reply.
  void FillStats(v1::StatsResponse* stats) const;
  void CountPull(int64_t bytes_out);
  void CountPushBytes(int64_t bytes_in);

 private:
  struct PartitionState;
  ShardStore(const ShardOptions& options, LearningRateSchedule schedule);

  absl::Status RequireInitialized() const;
  absl::StatusOr<const PartitionState*> Owned(uint32_t id) const;
  // Checks ids, ownership, byte counts, bounds, overlaps, that every element
  // is finite and at most `max_abs` in magnitude, and, if given, that the
  // ranges cover exactly `announced`.
  absl::Status ValidateRanges(const std::vector<PayloadRange>& ranges, v1::DType dtype,
                              const PartitionMap& map, bool require_full_cover, float max_abs,
                              const AnnouncedElements* announced = nullptr) const;
  // Makes a validated model visible to every other method.
  void Publish(const ModelLayout& layout, PartitionMap map,
               std::vector<std::unique_ptr<PartitionState>> partitions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(init_mu_);

  // UpdateTarget, for policy_.
  uint64_t BeginUpdate() override { return global_step_.fetch_add(1); }
  double LearningRateAt(uint64_t step) const override { return schedule_.At(step); }
  PartitionUpdate UpdatePartition(
      uint32_t id, uint64_t base_version, const std::vector<GradientRun>& runs,
      const std::function<StalenessStep(uint64_t staleness)>& plan) override;
  void ForEachPartition(size_t n, const std::function<void(size_t i, size_t lane)>& fn) override {
    lanes_.ForEach(n, fn);
  }
  size_t apply_lanes() const override { return lanes_.lanes(); }
  uint64_t CurrentVersion(uint32_t id) const override;
  absl::Status CheckBaseVersions(const std::vector<PayloadRange>& ranges,
                                 bool current_only) const override;
  RecentPushIds& recent_push_ids() override { return recent_push_ids_; }
  AsyncView View(uint64_t staleness, uint64_t updates_done) const override;
  int live_workers() const override { return live_workers_.load(std::memory_order_relaxed); }
  void ObserveStaleness(uint64_t staleness) override;
  void CountApplied(uint64_t pushes) override {
    pushes_applied_.fetch_add(pushes, std::memory_order_relaxed);
  }
  void CountDuplicate() override { pushes_duplicate_.fetch_add(1, std::memory_order_relaxed); }

  const ShardOptions options_;
  const LearningRateSchedule schedule_;
  const Optimizer optimizer_;
  const StalenessConfig staleness_;

  mutable absl::Mutex init_mu_;
  std::atomic<bool> initialized_{false};
  std::string kept_init_id_ ABSL_GUARDED_BY(init_mu_);  // Empty after a restore.
  ModelLayout layout_;
  PartitionMap map_;
  std::vector<std::unique_ptr<PartitionState>> partitions_;  // By id; null if not owned.

  RecentPushIds recent_push_ids_;
  PartitionLanes lanes_;
  std::atomic<int> live_workers_{0};
  std::atomic<double> recent_staleness_{0.0};
  std::atomic<uint64_t> global_step_{0};
  std::atomic<uint64_t> pushes_applied_{0}, pushes_duplicate_{0}, pushes_rejected_{0},
      pushes_too_stale_{0}, pulls_{0}, bytes_in_{0}, bytes_out_{0}, staleness_sum_{0},
      staleness_count_{0}, staleness_max_{0};
  // Last: it keeps a reference to this store, and its destructor may not
  // see the members above gone.
  const std::unique_ptr<UpdatePolicy> policy_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_SHARD_STORE_H_
