// spotps client library: the one way trainers and other services talk to the
// parameter-server shards.
//
//   auto cluster = spotps::Cluster::Connect("10.0.0.1:7000,10.0.0.2:7000");
//   if (!cluster.ok()) ...
//   absl::Status s = (*cluster)->FetchLayout();       // model must be initialised
//   spotps::WeightSnapshot w;
//   s = (*cluster)->Pull(spotps::v1::DTYPE_BF16, &w); // all shards in parallel
//   ... compute a gradient g over w.values ...
//   auto r = (*cluster)->Push(g, w.versions, spotps::v1::DTYPE_BF16);
//
// Every RPC has a deadline; UNAVAILABLE and DEADLINE_EXCEEDED are retried a
// bounded number of times with jittered exponential backoff. Pushes carry an
// id, so a retry of a push that did land is not applied twice.
#ifndef SPOTPS_CLIENT_CLUSTER_H_
#define SPOTPS_CLIENT_CLUSTER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/model_layout.h"
#include "client/partition_map.h"
#include "client/rpc_retry.h"
#include "spotps/v1/parameter_server.grpc.pb.h"

namespace spotps {

struct ClusterOptions {
  RetryPolicy retry;  // Deadline per attempt, attempts, backoff.
  // Payload bytes per stream message (partitions are at most 4 MiB FP32).
  int64_t message_bytes = int64_t{4} << 20;
  int64_t max_message_bytes = int64_t{64} << 20;
  // Pulls from one shard run over this many connections at once, so that
  // the shard's encoding, the kernel and the client's decoding overlap.
  int pull_streams_per_shard = 2;
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

struct PushResult {
  bool duplicate = false;     // Every shard had already applied this push id.
  // Shards in sync mode hold the gradient for the open round; it is applied
  // once the coordinator closes the round (commit the unit with this id).
  bool deferred = false;
  uint64_t max_staleness = 0;
  uint64_t global_step = 0;   // Highest shard global step after the push.
  int64_t bytes_sent = 0;
};

// A flat range of the parameter space and the values for it.
struct FlatSpan {
  int64_t flat_begin = 0;
  absl::Span<const float> values;
};

// Owns one gRPC channel per shard and the model's layout and partition map
// once known. Thread-compatible for setup (Connect, Init, FetchLayout);
// Pull, Push and Stats may then be called from several threads at once.
class Cluster {
 public:
  // `shard_list` is "host:port,host:port,..." in shard-index order. Does not
  // contact the shards.
  static absl::StatusOr<std::unique_ptr<Cluster>> Connect(absl::string_view shard_list,
                                                          const ClusterOptions& options = {});
  ~Cluster();

  // Initialises every shard with this layout and initial values (the whole
  // flat space). Safe when many clients race: each shard keeps the first valid
  // init; an identical layout succeeds; a different layout fails with
  // FAILED_PRECONDITION. Returns true if this call's values were applied on
  // every shard. Afterwards layout() and partition_map() are valid.
  absl::StatusOr<bool> Init(const ModelLayout& layout, absl::Span<const float> values);

  // Reads the layout from every shard and checks they agree (and that the
  // shard list is in the shards' own order). FAILED_PRECONDITION if the model
  // is not initialised yet.
  absl::Status FetchLayout();
  // FetchLayout, polling with backoff until the model is initialised.
  absl::Status WaitForLayout(absl::Duration timeout);

  bool has_layout() const { return has_layout_; }
  const ModelLayout& layout() const { return layout_; }
  const PartitionMap& partition_map() const { return map_; }
  size_t num_shards() const { return shards_.size(); }
  const std::string& shard_address(size_t shard) const;

  // Pulls the whole model from all shards in parallel. If `snapshot` already
  // holds versions for every partition, only changed partitions travel.
  absl::Status Pull(v1::DType wire_dtype, WeightSnapshot* snapshot);
  // Pulls one named tensor (always the current values).
  absl::StatusOr<std::vector<float>> PullTensor(absl::string_view name, v1::DType wire_dtype);

  // Pushes a gradient for the whole flat space, computed from weights at
  // `base_versions` (one per partition, as in WeightSnapshot). An empty
  // push_id gets a fresh one; pass the same id to retry by hand.
  absl::StatusOr<PushResult> Push(absl::Span<const float> gradient,
                                  absl::Span<const uint64_t> base_versions,
                                  v1::DType wire_dtype, std::string push_id = {});
  // Pushes gradients for named tensors only; the shard applies the optimizer
  // to exactly those elements.
  absl::StatusOr<PushResult> PushTensors(
      const std::vector<std::pair<std::string, absl::Span<const float>>>& gradients,
      absl::Span<const uint64_t> base_versions, v1::DType wire_dtype,
      std::string push_id = {});

  absl::StatusOr<std::vector<v1::StatsResponse>> Stats();

  // A process-unique id for a push: a random 64-bit prefix and a counter.
  std::string NewPushId();

 private:
  struct Shard;
  // Where pulled values go: flat elements [flat_begin, flat_begin + n).
  struct FlatDestination {
    int64_t flat_begin;
    float* values;
    int64_t num_elements;
  };
  struct PullCounters {
    int64_t bytes = 0;
    int64_t partitions = 0;
  };
  Cluster(std::vector<std::unique_ptr<Shard>> shards, const ClusterOptions& options);

  // Runs fn(shard) for every shard in parallel; returns the first error.
  absl::Status ForEachShard(const std::function<absl::Status(size_t)>& fn);
  // Calls `attempt` with a fresh context until it succeeds, fails with a
  // non-retryable code, or max_attempts is reached.
  absl::Status CallWithRetry(size_t shard, absl::string_view method,
                             const std::function<grpc::Status(grpc::ClientContext*)>& attempt);
  absl::Status SetLayout(const ModelLayout& layout);
  // Pulls partitions `ids` of one shard. With `known`, a partition is sent
  // only if its version differs from known[id]; `versions`, if given, gets
  // the version of each partition that arrived whole.
  absl::Status PullShard(size_t shard, v1::DType dtype, const std::vector<uint32_t>& ids,
                         const std::vector<uint64_t>* known, FlatDestination dst,
                         std::vector<uint64_t>* versions, PullCounters* counters);
  absl::Status PullLane(size_t shard, v1::ParameterServer::Stub& stub, v1::DType dtype,
                        const std::vector<uint32_t>& ids, const std::vector<uint64_t>* known,
                        FlatDestination dst, std::vector<uint64_t>* versions,
                        PullCounters* counters);
  absl::StatusOr<PushResult> PushSpans(const std::vector<FlatSpan>& spans,
                                       absl::Span<const uint64_t> base_versions,
                                       v1::DType wire_dtype, std::string push_id);

  std::vector<std::unique_ptr<Shard>> shards_;
  ClusterOptions options_;
  bool has_layout_ = false;
  ModelLayout layout_;
  PartitionMap map_;
  uint64_t push_id_prefix_;
  std::atomic<uint64_t> push_counter_{0};
};

}  // namespace spotps

#endif  // SPOTPS_CLIENT_CLUSTER_H_
