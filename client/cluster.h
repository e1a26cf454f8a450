// spotps client library: the one way trainers and other services talk to the
// parameter-server shards.
//
//   absl::StatusOr<std::unique_ptr<spotps::Cluster>> cluster =
//       spotps::Cluster::Connect("10.0.0.1:7000,10.0.0.2:7000");
//   if (!cluster.ok()) ...
//   absl::Status s = (*cluster)->FetchLayout();       // model must be initialised
//   spotps::WeightSnapshot w;
//   s = (*cluster)->Pull(spotps::v1::DTYPE_BF16, &w); // all shards in parallel
//   ... compute a gradient g over w.values ...
//   auto r = (*cluster)->Push(g, w.versions, spotps::v1::DTYPE_BF16);
//
// Errors. Every call returns absl::Status (or StatusOr); a message names the
// shard ("shard 1 (host:port) Push: ..."). Every RPC has a deadline
// (ClusterOptions::retry.deadline); UNAVAILABLE and DEADLINE_EXCEEDED are
// retried a bounded number of times with jittered exponential backoff and
// are returned only when the attempts ran out. Codes a caller must handle:
//
//   UNAVAILABLE / DEADLINE_EXCEEDED  a shard is down or unreachable for
//       longer than the retries: try again later (trainers back off).
//   FAILED_PRECONDITION  the model is not initialised yet, the shards hold
//       a different model, or the shard list is not in shard-index order.
//   ABORTED (Push)  the gradient is too stale for --max_staleness, or, in
//       sync mode, a round was applied since its weights were pulled: pull
//       again and recompute. Nothing of the push was applied on that shard.
//   OUT_OF_RANGE (Push)  a base version is newer than the shard's: the shard
//       restarted from a checkpoint. Pull again and recompute.
//   INVALID_ARGUMENT / NOT_FOUND  a bug in the caller: sizes, names, dtype.
//
// Pushes carry an id, so a retry of a push that did land is not applied
// twice (PushResult::duplicate), as long as the shard has not restarted.
#ifndef SPOTPS_CLIENT_CLUSTER_H_
#define SPOTPS_CLIENT_CLUSTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/channel_security.h"
#include "common/model_layout.h"
#include "common/partition_map.h"
#include "common/retry_policy.h"
#include "spotps/v1/parameter_server.pb.h"

namespace spotps {

struct ClusterOptions {
  RetryPolicy retry;  // Deadline per attempt, attempts, backoff.
  // Payload bytes per stream message (partitions are at most 4 MiB FP32);
  // below kMinStreamMessageBytes (64 KiB), that is used instead.
  int64_t message_bytes = int64_t{4} << 20;
  int64_t max_message_bytes = int64_t{64} << 20;
  // Pulls from one shard run over this many connections at once, so that
  // the shard's encoding, the kernel and the client's decoding overlap.
  int pull_streams_per_shard = 2;
  // TLS/mTLS and the bearer token (common/channel_security.h); the default
  // is plaintext without a token. ChannelSecurityFromFlags() reads the
  // --tls_ca, --tls_cert, --tls_key and --token_file flags into one.
  ChannelSecurity security;
};

// Version of a partition a snapshot does not hold (never equals a real one).
inline constexpr uint64_t kNoVersion = ~uint64_t{0};

// Weights as last pulled. `versions[p]` is the version partition p was read
// at; a conditional pull only transfers partitions whose version changed.
struct WeightSnapshot {
  std::vector<float> values;  // The whole flat parameter space.
  std::vector<uint64_t> versions;
  int64_t partitions_received = 0;  // By the last Pull.
  int64_t bytes_received = 0;       // Payload bytes of the last Pull.
};

// Optional parts of a pull.
struct PullOptions {
  // Empty, or one per partition: a partition is sent once its version is at
  // least this (PullRequest.min_versions): a trainer asks for the update
  // its push is in while the shards still apply it. A shard waits about
  // twice its --average_wait_ms at most, and no more than half the call's
  // deadline, then sends what it has.
  std::vector<uint64_t> min_versions;
  // Called with each partition's id once it has arrived whole, from the
  // pull's threads (so that a model can start on the first layers while the
  // later ones are still on their way). May be empty.
  std::function<void(uint32_t partition_id)> on_partition;
};

// What Cluster::Init did. Racing clients each win the shards they reach
// first, so a race can end with each holding some: with the same initial
// values on every client (trainers share --seed) the model is the same.
struct InitOutcome {
  int shards = 0;          // Shards in the cluster.
  int shards_applied = 0;  // Of them, those that kept this call's values.
  bool everywhere() const { return shards_applied == shards; }
  bool nowhere() const { return shards_applied == 0; }
};

struct PushResult {
  bool duplicate = false;  // Every shard had already applied this push id.
  // Shards in sync mode hold the gradient for the open round; it is applied
  // once the coordinator closes the round (commit the unit with this id).
  bool deferred = false;
  // Shards with --staleness_method=...+fresh answered once the push was in
  // their weights, and ask for a pull before the next gradient is computed.
  bool compute_on_fresh_weights = false;
  uint64_t max_staleness = 0;
  uint64_t global_step = 0;  // Highest shard global step after the push.
  int64_t bytes_sent = 0;
  // By partition id, the version each shard reported after the push
  // (kNoVersion for partitions it did not report: duplicates, sync mode).
  std::vector<uint64_t> versions;
};

// A push sent partition by partition while its gradient is still being
// computed (Cluster::StartPush), so that the transfer overlaps the
// computation. Each shard applies its part whole or not at all, as with
// Cluster::Push. One attempt, without retries: when Finish fails, push the
// whole gradient with Cluster::Push under the same push id (shards that
// applied this stream answer duplicate). Not thread-safe.
class GradientStream {
 public:
  virtual ~GradientStream() = default;  // Cancels the push unless finished.
  // Sends every shard the push's first message now, before any gradient
  // (otherwise it goes with the first partition). A shard then learns at
  // once when this client dies while it computes (the stream breaks), and
  // stops counting it as a live pusher; "fresh" updates stop waiting.
  virtual void Announce() = 0;
  // Sends partition `partition_id`'s gradient, values[0, its size), FP32,
  // as soon as it makes a message (encoded on the calling thread). Each
  // partition once, in any order; `values` must stay valid until Finish.
  virtual void Send(uint32_t partition_id, const float* values) = 0;
  // Sends what is left with `gradient_scale` (the shards use the gradient
  // times it; in (0, 1]), closes every shard's stream, runs `after_sent`
  // if given (a pull of the update this push is in may start there), and
  // waits for the shards' answers. FAILED_PRECONDITION, sending nothing
  // more, when a partition was not sent.
  virtual absl::StatusOr<PushResult> Finish(float gradient_scale = 1.0f,
                                            const std::function<void()>& after_sent = {}) = 0;
};

// A flat range of the parameter space and the values for it.
struct FlatSpan {
  int64_t flat_begin = 0;
  absl::Span<const float> values;
};

// Owns one set of gRPC connections per shard, the threads that call them in
// parallel, and the model's layout and partition map once known.
// Thread-compatible for setup (Connect, Init, FetchLayout, WaitForLayout);
// Pull, PullTensor, Push, PushTensors and Stats may then be called from
// several threads at once.
class Cluster {
 public:
  // `shard_list` is "host:port,host:port,..." in shard-index order. Does not
  // contact the shards. INVALID_ARGUMENT for an empty or malformed list, or
  // options out of range.
  static absl::StatusOr<std::unique_ptr<Cluster>> Connect(absl::string_view shard_list,
                                                          const ClusterOptions& options = {});
  ~Cluster();

  // Initialises every shard with this layout and initial values (the whole
  // flat space). Safe when many clients race: each shard keeps the first
  // valid init; an identical layout succeeds; a different layout fails with
  // FAILED_PRECONDITION. Says on how many shards this call's values were
  // kept. Afterwards layout() and partition_map() are valid.
  absl::StatusOr<InitOutcome> Init(const ModelLayout& layout, absl::Span<const float> values);

  // Reads the layout from every shard and checks they agree (and that the
  // shard list is in the shards' own order). FAILED_PRECONDITION if the model
  // is not initialised yet, the shards disagree, or the list is out of order.
  absl::Status FetchLayout();
  // FetchLayout, polling with backoff until the model is initialised or
  // `timeout` passed (then the last error, FAILED_PRECONDITION or
  // UNAVAILABLE, saying what it waited for). Says every 5 s what it waits
  // for, through LogInfo (client/unreachable_wait.h).
  absl::Status WaitForLayout(absl::Duration timeout);

  // Valid after a successful Init, FetchLayout or WaitForLayout.
  bool has_layout() const;
  const ModelLayout& layout() const;
  const PartitionMap& partition_map() const;
  size_t num_shards() const;
  const std::string& shard_address(size_t shard) const;
  // Every shard's address, comma-separated, for messages.
  std::string addresses() const;
  // As given to Connect, for more channels to the same cluster (shard 0's
  // coordinator).
  const ChannelSecurity& security() const;

  // Pulls the whole model from all shards in parallel. If `snapshot` already
  // holds versions for every partition, only changed partitions travel. On
  // error, only partitions that arrived whole get their new version; others
  // may hold some new values but keep their old version, so the next Pull
  // fetches them again.
  absl::Status Pull(v1::DType wire_dtype, WeightSnapshot* snapshot);
  absl::Status Pull(v1::DType wire_dtype, WeightSnapshot* snapshot, const PullOptions& options);
  // Pulls one named tensor (always the current values). NOT_FOUND for an
  // unknown name.
  absl::StatusOr<std::vector<float>> PullTensor(absl::string_view name, v1::DType wire_dtype);

  // Pushes a gradient for the whole flat space, computed from weights at
  // `base_versions` (one per partition, as in WeightSnapshot). An empty
  // push_id gets a fresh one; pass the same id to retry by hand. Each shard
  // applies its part whole or not at all; on an error some shards may have
  // applied their part (retry with the same id: those report duplicate).
  // wire_dtype may also be DTYPE_INT8 (blockwise, common/int8_blocks.h):
  // each partition goes out in chunks cut at its 256-element blocks, so
  // the shards get exactly RoundTripInt8Blocks of each partition's values.
  absl::StatusOr<PushResult> Push(absl::Span<const float> gradient,
                                  absl::Span<const uint64_t> base_versions, v1::DType wire_dtype,
                                  std::string push_id = {});
  // Opens a push of the whole flat space whose partitions the caller sends
  // as they become ready (GradientStream). Same arguments as Push, but
  // FP32 or BF16 only.
  absl::StatusOr<std::unique_ptr<GradientStream>> StartPush(
      absl::Span<const uint64_t> base_versions, v1::DType wire_dtype, std::string push_id = {});
  // Pushes gradients for named tensors only; the shard applies the optimizer
  // to exactly those elements. NOT_FOUND for an unknown name.
  absl::StatusOr<PushResult> PushTensors(
      const std::vector<std::pair<std::string, absl::Span<const float>>>& gradients,
      absl::Span<const uint64_t> base_versions, v1::DType wire_dtype, std::string push_id = {});

  // Every shard's counters, in shard order.
  absl::StatusOr<std::vector<v1::StatsResponse>> Stats();
  // Tells every shard that this client is about to train its first unit:
  // a shard that has applied no update yet counts it as a live pusher now,
  // so that the job's first averaged update waits for its gradient too
  // (ParameterServer/Join). Returns how many shards counted it. Best
  // effort: one attempt of at most 2 s per shard. Then holds a presence
  // stream open to every shard (ParameterServer/Attend) until Leave, so that
  // if this process dies, every shard stops counting it at once.
  absl::StatusOr<int> Join();
  // Tells every shard that this client pushes no more (a trainer leaving),
  // so that none waits for its next push in an averaged update, and closes
  // the presence streams. Best effort: one attempt of at most 2 s per shard.
  absl::Status Leave();

  // A process-unique id for a push: a random 64-bit prefix and a counter.
  std::string NewPushId();

 private:
  class Impl;
  explicit Cluster(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace spotps

#endif  // SPOTPS_CLIENT_CLUSTER_H_
