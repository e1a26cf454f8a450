#include "client/cluster.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/gradient_stream.h"
#include "client/grpc_presence_stream.h"
#include "client/presence_stream.h"
#include "client/shard_connection.h"
#include "client/unreachable_wait.h"
#include "common/chunk_frame.h"
#include "common/fan_out_pool.h"
#include "common/int8_blocks.h"
#include "common/kernel_random.h"
#include "common/rpc_retry.h"
#include "common/tensor_codec.h"
#include "common/transport_args.h"
#include "spotps/v1/parameter_server.grpc.pb.h"

namespace spotps {

namespace {

// One contiguous run of values destined for one partition.
struct ChunkSource {
  uint32_t partition_id;
  int64_t offset;
  const float* values;
  int64_t num_elements;
  uint64_t version;
};

// Streams `sources` as chunks of at most `message_bytes` payload each (at
// least kMinStreamMessageBytes, as shards require); the first message also
// carries whatever `first` holds (the header). Returns false when the stream
// broke (Finish() then says why).
template <typename Request>
bool WriteChunks(grpc::ClientWriter<Request>* writer, Request first,
                 const std::vector<ChunkSource>& sources, v1::DType dtype, int64_t message_bytes) {
  const int64_t width = static_cast<int64_t>(WireBytesPerElement(dtype));
  const int64_t per_message = std::max(kMinStreamMessageBytes, message_bytes) / width;
  Request msg = std::move(first);
  int64_t pending = 0;
  bool header_sent = false;
  for (const ChunkSource& src : sources) {
    for (int64_t done = 0; done < src.num_elements;) {
      const int64_t n = std::min(per_message - pending, src.num_elements - done);
      v1::PartitionChunk* chunk = msg.add_chunks();
      chunk->set_partition_id(src.partition_id);
      chunk->set_offset(src.offset + done);
      chunk->set_version(src.version);
      AppendEncoded(src.values + done, n, dtype, chunk->mutable_data());
      done += n;
      pending += n;
      if (pending == per_message) {
        if (!writer->Write(msg)) return false;
        msg.Clear();
        pending = 0;
        header_sent = true;
      }
    }
  }
  if (pending > 0 || !header_sent) {
    if (!writer->Write(msg)) return false;
  }
  return writer->WritesDone();
}

// Streams a push's `sources` as raw messages of at most `message_bytes`
// payload each (at least kMinStreamMessageBytes, as shards require), each
// payload encoded straight into its message's slice; the first message also
// carries `header` (every field but the chunks). The message layout is
// WriteChunks's. Returns false when the stream broke (Finish() says why).
bool WritePushFrames(grpc::ClientWriter<grpc::ByteBuffer>* writer, const v1::PushRequest& header,
                     const std::vector<ChunkSource>& sources, v1::DType dtype,
                     int64_t message_bytes) {
  const bool int8 = dtype == v1::DTYPE_INT8;
  // Elements per message; an int8 element takes about a byte.
  const int64_t per_message = std::max(kMinStreamMessageBytes, message_bytes) /
                              (int8 ? 1 : static_cast<int64_t>(WireBytesPerElement(dtype)));
  std::string fields = header.SerializeAsString();
  std::vector<ChunkHeader> chunks;
  std::vector<const float*> values;
  std::vector<int64_t> counts;
  int64_t pending = 0;
  auto send = [&] {
    ChunkFrameWriter frame(fields, kPushChunksField, chunks);
    for (size_t c = 0; c < chunks.size(); ++c) {
      EncodePayload(values[c], chunks[c].offset, counts[c], dtype, frame.payload(c));
    }
    fields.clear();
    chunks.clear();
    values.clear();
    counts.clear();
    pending = 0;
    return writer->Write(frame.Take());
  };
  bool header_sent = false;
  for (const ChunkSource& src : sources) {
    for (int64_t done = 0; done < src.num_elements;) {
      int64_t n = std::min(per_message - pending, src.num_elements - done);
      const uint64_t offset = static_cast<uint64_t>(src.offset + done);
      // An int8 chunk that stops inside its source stops at a block border,
      // so that every block goes out under one scale (int8_blocks.h).
      if (int8 && n < src.num_elements - done) {
        n -= static_cast<int64_t>((offset + n) % kInt8BlockElements);
      }
      if (n > 0) {
        chunks.push_back(
            ChunkHeader{src.partition_id, offset, src.version, PayloadBytes(dtype, offset, n)});
        values.push_back(src.values + done);
        counts.push_back(n);
        done += n;
        pending += n;
      }
      if (n <= 0 || pending == per_message) {
        if (!send()) return false;
        header_sent = true;
      }
    }
  }
  if (pending > 0 || !header_sent) {
    if (!send()) return false;
  }
  return writer->WritesDone();
}

}  // namespace

// Everything behind the public header: connections, fan-out threads and
// the layout.
class Cluster::Impl {
 public:
  Impl(std::vector<std::unique_ptr<ShardConnection>> shards, const ClusterOptions& options);

  absl::StatusOr<InitOutcome> Init(const ModelLayout& layout, absl::Span<const float> values);
  absl::Status FetchLayout();
  absl::Status WaitForLayout(absl::Duration timeout);
  std::string Addresses() const;
  absl::Status Pull(v1::DType wire_dtype, WeightSnapshot* snapshot, const PullOptions& options);
  absl::StatusOr<std::vector<float>> PullTensor(absl::string_view name, v1::DType wire_dtype);
  absl::StatusOr<PushResult> Push(absl::Span<const float> gradient,
                                  absl::Span<const uint64_t> base_versions, v1::DType wire_dtype,
                                  std::string push_id);
  absl::StatusOr<PushResult> PushTensors(
      const std::vector<std::pair<std::string, absl::Span<const float>>>& gradients,
      absl::Span<const uint64_t> base_versions, v1::DType wire_dtype, std::string push_id);
  absl::StatusOr<std::unique_ptr<GradientStream>> StartPush(
      absl::Span<const uint64_t> base_versions, v1::DType wire_dtype, std::string push_id);
  absl::StatusOr<std::vector<v1::StatsResponse>> Stats();
  absl::StatusOr<int> Join();
  absl::Status Leave();
  // Starts a presence stream to every shard (ParameterServer.Attend), kept
  // open until Leave; once.
  void AttendShards();
  // For calls nothing depends on (Join, Leave): one attempt of at most 2 s.
  RetryPolicy BestEffort() const;
  std::string NewPushId();
  // PushRequest.worker_id: this client's push-id prefix.
  std::string WorkerId() const { return absl::StrFormat("%016x", push_id_prefix_); }
  const ClusterOptions& options() const { return options_; }

  bool has_layout_ = false;
  ModelLayout layout_;
  PartitionMap map_;
  std::vector<std::unique_ptr<ShardConnection>> shards_;

 private:
  // One per shard from Join to Leave. Declared after shards_, whose stubs
  // the keepers' threads use: destroyed (and stopped) before them.
  absl::Mutex presence_mu_;
  std::vector<std::unique_ptr<PresenceKeeper>> presence_ ABSL_GUARDED_BY(presence_mu_);

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

  // Runs fn(shard) for every shard in parallel; returns the first error.
  absl::Status ForEachShard(const std::function<absl::Status(size_t)>& fn);
  // Calls `attempt` with a fresh context until it succeeds, fails with a
  // non-retryable code, or max_attempts is reached.
  absl::Status CallWithRetry(size_t shard, absl::string_view method,
                             const std::function<grpc::Status(grpc::ClientContext*)>& attempt);
  absl::Status SetLayout(const ModelLayout& layout);
  // What one pull asks for and where its values go.
  struct PullJob {
    v1::DType dtype = v1::DTYPE_BF16;
    // A partition is sent only if its version differs from known[id].
    const std::vector<uint64_t>* known = nullptr;
    // PullRequest.min_versions, by partition id.
    const std::vector<uint64_t>* min_versions = nullptr;
    FlatDestination dst{};
    // Gets the version of each partition that arrived whole.
    std::vector<uint64_t>* versions = nullptr;
    // Told each partition that arrived whole (from the pull's threads).
    const std::function<void(uint32_t)>* on_partition = nullptr;
  };
  // Pulls partitions `ids` of one shard.
  absl::Status PullShard(size_t shard, const std::vector<uint32_t>& ids, const PullJob& job,
                         PullCounters* counters);
  // Over one connection; a retry asks only for what has not arrived whole.
  absl::Status PullLane(size_t shard, grpc::Channel& channel, std::vector<uint32_t> ids,
                        const PullJob& job, PullCounters* counters);
  absl::StatusOr<PushResult> PushSpans(const std::vector<FlatSpan>& spans,
                                       absl::Span<const uint64_t> base_versions,
                                       v1::DType wire_dtype, std::string push_id);

  ClusterOptions options_;
  uint64_t push_id_prefix_;
  std::atomic<uint64_t> push_counter_{0};
  // The BF16 conversions in pulls and pushes are pinned to one thread each
  // (see UseSingleThreadedConversion), which must not leak into the
  // caller's OpenMP settings: so every shard call runs on a pool thread.
  FanOutPool pool_{[] { UseSingleThreadedConversion(); }};
};

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Connect(absl::string_view shard_list,
                                                          const ClusterOptions& options) {
  std::vector<std::unique_ptr<ShardConnection>> shards;
  for (absl::string_view address : absl::StrSplit(shard_list, ',', absl::SkipWhitespace())) {
    if (address.find(':') == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard address '", address, "' is not host:port"));
    }
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
    args.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
    // A private subchannel pool gives each Cluster its own TCP connections,
    // so two clients in one process do not share (and serialize on) one.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    // Reconnect quickly after a shard restarts instead of gRPC's default
    // exponential backoff of up to two minutes.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    for (const auto& [name, value] : BulkTransportArgs()) args.SetInt(name, value);
    auto shard = std::make_unique<ShardConnection>();
    shard->address = std::string(address);
    shard->channel = CreateSecureChannel(shard->address, options.security, args);
    shard->stub = v1::ParameterServer::NewStub(shard->channel);
    for (int lane = 0; lane < options.pull_streams_per_shard; ++lane) {
      // A distinct argument value keeps each lane on its own connection.
      grpc::ChannelArguments lane_args = args;
      lane_args.SetInt("spotps.pull_lane", lane);
      shard->pull_channels.push_back(
          CreateSecureChannel(shard->address, options.security, lane_args));
    }
    shards.push_back(std::move(shard));
  }
  if (shards.empty()) return absl::InvalidArgumentError("shard list is empty");
  if (options.pull_streams_per_shard < 1) {
    return absl::InvalidArgumentError("pull_streams_per_shard must be >= 1");
  }
  if (shards.size() > PartitionMap::kMaxShards) {
    return absl::InvalidArgumentError("shard list has too many addresses");
  }
  return std::unique_ptr<Cluster>(new Cluster(std::make_unique<Impl>(std::move(shards), options)));
}

Cluster::Impl::Impl(std::vector<std::unique_ptr<ShardConnection>> shards,
                    const ClusterOptions& options)
    : shards_(std::move(shards)), options_(options) {
  push_id_prefix_ = KernelRandomU64();
}

std::string Cluster::Impl::NewPushId() {
  return absl::StrFormat("%016x-%d", push_id_prefix_, push_counter_.fetch_add(1));
}

absl::Status Cluster::Impl::ForEachShard(const std::function<absl::Status(size_t)>& fn) {
  return pool_.Run(shards_.size(), fn);
}

absl::Status Cluster::Impl::CallWithRetry(
    size_t shard, absl::string_view method,
    const std::function<grpc::Status(grpc::ClientContext*)>& attempt) {
  return spotps::CallWithRetry(
      options_.retry, absl::StrCat("shard ", shard, " (", shards_[shard]->address, ") ", method),
      attempt);
}

absl::Status Cluster::Impl::SetLayout(const ModelLayout& layout) {
  absl::StatusOr<PartitionMap> map =
      PartitionMap::Create(layout, static_cast<uint32_t>(shards_.size()));
  if (!map.ok()) return map.status();
  layout_ = layout;
  map_ = *std::move(map);
  has_layout_ = true;
  return absl::OkStatus();
}

absl::Status Cluster::Impl::FetchLayout() {
  std::vector<v1::GetLayoutResponse> replies(shards_.size());
  absl::Status s = ForEachShard([&](size_t i) {
    return CallWithRetry(i, "GetLayout", [&](grpc::ClientContext* ctx) {
      return shards_[i]->stub->GetLayout(ctx, v1::GetLayoutRequest(), &replies[i]);
    });
  });
  if (!s.ok()) return s;
  for (size_t i = 0; i < replies.size(); ++i) {
    const v1::GetLayoutResponse& r = replies[i];
    if (r.num_shards() != shards_.size() || r.shard_index() != i) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "shard list has %d addresses and lists %s at position %d, but that server is "
          "shard %d of %d: list the shards in shard-index order",
          shards_.size(), shards_[i]->address, i, r.shard_index(), r.num_shards()));
    }
    if (!r.initialized()) {
      return absl::FailedPreconditionError(
          absl::StrFormat("model is not initialised on shard %d (%s)", i, shards_[i]->address));
    }
    if (r.layout_fingerprint() != replies[0].layout_fingerprint()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "shards disagree on the model: shard 0 has layout %016x, shard %d has %016x",
          replies[0].layout_fingerprint(), i, r.layout_fingerprint()));
    }
  }
  absl::StatusOr<ModelLayout> layout = ModelLayout::FromProto(replies[0].layout());
  if (!layout.ok()) return layout.status();
  return SetLayout(*layout);
}

absl::Status Cluster::Impl::WaitForLayout(absl::Duration timeout) {
  return UnreachableWait(absl::StrCat("the model on the shards at ", Addresses()), timeout)
      .WaitForModel()
      .Retry([this] { return FetchLayout(); });
}

std::string Cluster::Impl::Addresses() const {
  return absl::StrJoin(shards_, ",", [](std::string* out, const auto& shard) {
    out->append(shard->address);
  });
}

absl::StatusOr<InitOutcome> Cluster::Impl::Init(const ModelLayout& layout,
                                                absl::Span<const float> values) {
  if (static_cast<int64_t>(values.size()) != layout.total_elements()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Init: %d initial values for a layout of %d elements", values.size(),
                        layout.total_elements()));
  }
  absl::StatusOr<PartitionMap> map =
      PartitionMap::Create(layout, static_cast<uint32_t>(shards_.size()));
  if (!map.ok()) return map.status();
  const v1::ModelLayout layout_proto = layout.ToProto();
  const std::string init_id = NewPushId();  // Unique per call; kept by its retries.
  std::vector<char> applied(shards_.size(), 0);
  absl::Status s = ForEachShard([&](size_t i) {
    std::vector<ChunkSource> sources;
    for (uint32_t id : map->PartitionsOfShard(static_cast<uint32_t>(i))) {
      const Partition& p = map->partitions()[id];
      sources.push_back({id, 0, values.data() + p.flat_begin, p.num_elements, 0});
    }
    return CallWithRetry(i, "Init", [&](grpc::ClientContext* ctx) {
      v1::InitResponse reply;
      auto writer = shards_[i]->stub->Init(ctx, &reply);
      v1::InitRequest header;
      *header.mutable_layout() = layout_proto;
      header.set_num_shards(static_cast<uint32_t>(shards_.size()));
      header.set_shard_index(static_cast<uint32_t>(i));
      header.set_init_id(init_id);
      WriteChunks(writer.get(), std::move(header), sources, v1::DTYPE_FP32, options_.message_bytes);
      grpc::Status st = writer->Finish();
      applied[i] = st.ok() && reply.applied();
      return st;
    });
  });
  if (!s.ok()) return s;
  if (absl::Status set = SetLayout(layout); !set.ok()) return set;
  InitOutcome outcome;
  outcome.shards = static_cast<int>(shards_.size());
  outcome.shards_applied = static_cast<int>(std::count(applied.begin(), applied.end(), 1));
  return outcome;
}

absl::Status Cluster::Impl::PullShard(size_t shard, const std::vector<uint32_t>& ids,
                                      const PullJob& job, PullCounters* counters) {
  const size_t lanes = std::min(shards_[shard]->pull_channels.size(), ids.size());
  if (lanes <= 1) return PullLane(shard, *shards_[shard]->pull_channels[0], ids, job, counters);
  std::vector<std::vector<uint32_t>> lane_ids(lanes);
  for (size_t i = 0; i < ids.size(); ++i) lane_ids[i % lanes].push_back(ids[i]);
  std::vector<PullCounters> lane_counters(lanes);
  absl::Status s = pool_.Run(lanes, [&](size_t l) {
    return PullLane(shard, *shards_[shard]->pull_channels[l], lane_ids[l], job,
                    &lane_counters[l]);
  });
  for (const PullCounters& c : lane_counters) {
    counters->bytes += c.bytes;
    counters->partitions += c.partitions;
  }
  return s;
}

absl::Status Cluster::Impl::PullLane(size_t shard, grpc::Channel& channel,
                                     std::vector<uint32_t> ids, const PullJob& job,
                                     PullCounters* counters) {
  const int64_t width = static_cast<int64_t>(WireBytesPerElement(job.dtype));
  const FlatDestination& dst = job.dst;
  std::map<uint32_t, int64_t> received;
  return CallWithRetry(shard, "Pull", [&](grpc::ClientContext* ctx) {
    // Partitions that arrived whole in an earlier attempt are not asked
    // for again: a caller may be reading them already.
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [&](uint32_t id) {
                               auto r = received.find(id);
                               return r != received.end() &&
                                      r->second == map_.partitions()[id].num_elements;
                             }),
              ids.end());
    received.clear();
    if (ids.empty()) return grpc::Status::OK;
    v1::PullRequest request;
    request.set_dtype(job.dtype);
    for (uint32_t id : ids) {
      request.add_partition_ids(id);
      if (job.known != nullptr) request.add_known_versions((*job.known)[id]);
      if (job.min_versions != nullptr) request.add_min_versions((*job.min_versions)[id]);
    }
    std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
        grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
            &channel, shards_[shard]->pull_method, ctx, request));
    grpc::ByteBuffer buffer;
    ChunkFrameReader frame;
    v1::PullResponse fields;
    std::string error;
    while (error.empty() && reader->Read(&buffer)) {
      if (!frame.Parse(&buffer, kPullChunksField) || !fields.ParseFromString(frame.fields())) {
        error = "pull response does not parse as a spotps.v1.PullResponse";
        break;
      }
      for (const ChunkView& chunk : frame.chunks()) {
        const Partition* p = map_.Find(chunk.partition_id);
        const int64_t n = static_cast<int64_t>(chunk.payload_bytes) / width;
        if (fields.dtype() != job.dtype || p == nullptr || p->shard != shard ||
            chunk.payload_bytes % width != 0 ||
            chunk.offset > static_cast<uint64_t>(p->num_elements) ||
            static_cast<int64_t>(chunk.offset) + n > p->num_elements) {
          error = absl::StrFormat("malformed pull chunk for partition %d", chunk.partition_id);
          break;
        }
        const int64_t begin =
            std::max(p->flat_begin + static_cast<int64_t>(chunk.offset), dst.flat_begin);
        const int64_t end = std::min(p->flat_begin + static_cast<int64_t>(chunk.offset) + n,
                                     dst.flat_begin + dst.num_elements);
        if (begin < end) {
          // Decoded straight out of the received slices.
          const int64_t skip = begin - p->flat_begin - static_cast<int64_t>(chunk.offset);
          chunk.DecodePayload(job.dtype, skip, end - begin, dst.values + (begin - dst.flat_begin));
        }
        counters->bytes += static_cast<int64_t>(chunk.payload_bytes);
        if ((received[chunk.partition_id] += n) == p->num_elements) {
          if (job.versions != nullptr) (*job.versions)[chunk.partition_id] = chunk.version;
          counters->partitions += 1;
          if (job.on_partition != nullptr) (*job.on_partition)(chunk.partition_id);
        }
      }
    }
    if (!error.empty()) {
      ctx->TryCancel();
      reader->Finish();
      return grpc::Status(grpc::StatusCode::INTERNAL, error);
    }
    return reader->Finish();
  });
}

absl::Status Cluster::Impl::Pull(v1::DType wire_dtype, WeightSnapshot* snapshot,
                                 const PullOptions& options) {
  if (!has_layout_)
    return absl::FailedPreconditionError("Pull: layout not known; call FetchLayout");
  if (!IsValidWireDType(wire_dtype)) return absl::InvalidArgumentError("Pull: bad wire dtype");
  const size_t num_partitions = map_.partitions().size();
  if (!options.min_versions.empty() && options.min_versions.size() != num_partitions) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Pull: %d minimum versions for %d partitions", options.min_versions.size(),
        num_partitions));
  }
  const bool conditional =
      snapshot->versions.size() == num_partitions &&
      static_cast<int64_t>(snapshot->values.size()) == layout_.total_elements();
  if (!conditional) {
    // Every element is overwritten by the pull, so no zero-fill is needed.
    snapshot->values.resize(layout_.total_elements());
    snapshot->versions.assign(num_partitions, kNoVersion);
  }
  // Versions are updated only once a partition arrived whole, so a failed
  // pull leaves no partition marked fresh that is not.
  const std::vector<uint64_t> known = snapshot->versions;
  std::vector<PullCounters> counters(shards_.size());
  PullJob job;
  job.dtype = wire_dtype;
  job.known = conditional ? &known : nullptr;
  job.min_versions = options.min_versions.empty() ? nullptr : &options.min_versions;
  job.dst = FlatDestination{0, snapshot->values.data(), layout_.total_elements()};
  job.versions = &snapshot->versions;
  job.on_partition = options.on_partition ? &options.on_partition : nullptr;
  absl::Status s = ForEachShard([&](size_t i) {
    return PullShard(i, map_.PartitionsOfShard(i), job, &counters[i]);
  });
  snapshot->bytes_received = 0;
  snapshot->partitions_received = 0;
  for (const PullCounters& c : counters) {
    snapshot->bytes_received += c.bytes;
    snapshot->partitions_received += c.partitions;
  }
  return s;
}

absl::StatusOr<std::vector<float>> Cluster::Impl::PullTensor(absl::string_view name,
                                                             v1::DType wire_dtype) {
  if (!has_layout_) return absl::FailedPreconditionError("PullTensor: layout not known");
  if (!IsValidWireDType(wire_dtype)) return absl::InvalidArgumentError("bad wire dtype");
  const TensorSlot* slot = layout_.Find(name);
  if (slot == nullptr) {
    return absl::NotFoundError(absl::StrCat("model has no tensor named '", name, "'"));
  }
  std::vector<float> out(slot->num_elements);
  std::vector<std::vector<uint32_t>> ids(shards_.size());
  for (const PartitionRange& r : map_.Cover(slot->flat_offset, slot->num_elements)) {
    ids[map_.partitions()[r.partition_id].shard].push_back(r.partition_id);
  }
  PullJob job;
  job.dtype = wire_dtype;
  job.dst = FlatDestination{slot->flat_offset, out.data(), slot->num_elements};
  std::vector<PullCounters> counters(shards_.size());
  absl::Status s = ForEachShard([&](size_t i) {
    if (ids[i].empty()) return absl::OkStatus();
    return PullShard(i, ids[i], job, &counters[i]);
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<PushResult> Cluster::Impl::Push(absl::Span<const float> gradient,
                                               absl::Span<const uint64_t> base_versions,
                                               v1::DType wire_dtype, std::string push_id) {
  if (!has_layout_) return absl::FailedPreconditionError("Push: layout not known");
  if (static_cast<int64_t>(gradient.size()) != layout_.total_elements()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Push: gradient has %d elements, the model %d", gradient.size(), layout_.total_elements()));
  }
  return PushSpans({FlatSpan{0, gradient}}, base_versions, wire_dtype, std::move(push_id));
}

absl::StatusOr<PushResult> Cluster::Impl::PushTensors(
    const std::vector<std::pair<std::string, absl::Span<const float>>>& gradients,
    absl::Span<const uint64_t> base_versions, v1::DType wire_dtype, std::string push_id) {
  if (!has_layout_) return absl::FailedPreconditionError("PushTensors: layout not known");
  std::vector<FlatSpan> spans;
  for (const auto& [name, values] : gradients) {
    const TensorSlot* slot = layout_.Find(name);
    if (slot == nullptr) {
      return absl::NotFoundError(absl::StrCat("model has no tensor named '", name, "'"));
    }
    if (static_cast<int64_t>(values.size()) != slot->num_elements) {
      return absl::InvalidArgumentError(
          absl::StrFormat("gradient for '%s' has %d elements, the tensor %d", name, values.size(),
                          slot->num_elements));
    }
    spans.push_back(FlatSpan{slot->flat_offset, values});
  }
  return PushSpans(spans, base_versions, wire_dtype, std::move(push_id));
}

absl::StatusOr<PushResult> Cluster::Impl::PushSpans(const std::vector<FlatSpan>& spans,
                                                    absl::Span<const uint64_t> base_versions,
                                                    v1::DType wire_dtype, std::string push_id) {
  if (!IsValidPushDType(wire_dtype)) return absl::InvalidArgumentError("Push: bad wire dtype");
  if (base_versions.size() != map_.partitions().size()) {
    return absl::InvalidArgumentError(absl::StrFormat("Push: %d base versions for %d partitions",
                                                      base_versions.size(),
                                                      map_.partitions().size()));
  }
  if (push_id.empty()) push_id = NewPushId();
  std::vector<std::vector<ChunkSource>> sources(shards_.size());
  for (const FlatSpan& span : spans) {
    for (const PartitionRange& r : map_.Cover(span.flat_begin, span.values.size())) {
      const Partition& p = map_.partitions()[r.partition_id];
      sources[p.shard].push_back({r.partition_id, r.offset,
                                  span.values.data() + (r.flat_begin - span.flat_begin),
                                  r.num_elements, base_versions[r.partition_id]});
    }
  }
  const std::string worker_id = WorkerId();
  std::vector<ShardPushReply> replies(shards_.size());
  absl::Status s = ForEachShard([&](size_t i) {
    if (sources[i].empty()) return absl::OkStatus();
    replies[i].contacted = true;
    std::map<uint32_t, int64_t> announced;
    for (const ChunkSource& src : sources[i]) {
      announced[src.partition_id] += src.num_elements;
      replies[i].bytes +=
          static_cast<int64_t>(PayloadBytes(wire_dtype, src.offset, src.num_elements));
    }
    const v1::PushRequest header = PushHeader(push_id, wire_dtype, worker_id, announced);
    return CallWithRetry(i, "Push", [&](grpc::ClientContext* ctx) {
      std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
          grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
              shards_[i]->channel.get(), shards_[i]->push_method, ctx, &replies[i].reply));
      WritePushFrames(writer.get(), header, sources[i], wire_dtype, options_.message_bytes);
      return writer->Finish();
    });
  });
  if (!s.ok()) return s;
  return CombinePushReplies(replies, map_.partitions().size());
}

absl::StatusOr<std::unique_ptr<GradientStream>> Cluster::Impl::StartPush(
    absl::Span<const uint64_t> base_versions, v1::DType wire_dtype, std::string push_id) {
  if (!has_layout_) return absl::FailedPreconditionError("StartPush: layout not known");
  if (!IsValidWireDType(wire_dtype)) return absl::InvalidArgumentError("StartPush: bad wire dtype");
  if (base_versions.size() != map_.partitions().size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "StartPush: %d base versions for %d partitions", base_versions.size(),
        map_.partitions().size()));
  }
  GradientStreamOptions options;
  options.push_id = push_id.empty() ? NewPushId() : std::move(push_id);
  options.worker_id = WorkerId();
  options.dtype = wire_dtype;
  options.deadline = options_.retry.deadline;
  options.message_bytes = options_.message_bytes;
  std::vector<ShardConnection*> shards;
  for (const std::unique_ptr<ShardConnection>& shard : shards_) shards.push_back(shard.get());
  return OpenGradientStream(shards, map_, base_versions, options);
}

absl::StatusOr<std::vector<v1::StatsResponse>> Cluster::Impl::Stats() {
  std::vector<v1::StatsResponse> replies(shards_.size());
  absl::Status s = ForEachShard([&](size_t i) {
    return CallWithRetry(i, "Stats", [&](grpc::ClientContext* ctx) {
      return shards_[i]->stub->Stats(ctx, v1::StatsRequest(), &replies[i]);
    });
  });
  if (!s.ok()) return s;
  return replies;
}

absl::StatusOr<int> Cluster::Impl::Join() {
  v1::JoinRequest request;
  request.set_worker_id(WorkerId());
  std::atomic<int> counted{0};
  absl::Status s = ForEachShard([&](size_t i) {
    v1::JoinResponse reply;
    absl::Status r = spotps::CallWithRetry(
        BestEffort(), absl::StrCat("shard ", i, " (", shards_[i]->address, ") Join"),
        [&](grpc::ClientContext* ctx) { return shards_[i]->stub->Join(ctx, request, &reply); });
    if (r.ok() && reply.counted()) counted.fetch_add(1);
    return r;
  });
  AttendShards();
  if (!s.ok()) return s;
  return counted.load();
}

void Cluster::Impl::AttendShards() {
  absl::MutexLock lock(&presence_mu_);
  if (!presence_.empty()) return;
  v1::PresenceRequest request;
  request.set_worker_id(WorkerId());
  for (const std::unique_ptr<ShardConnection>& shard : shards_) {
    v1::ParameterServer::Stub* stub = shard->stub.get();
    const std::string what =
        absl::StrCat("shard ", presence_.size(), " (", shard->address, ") Attend");
    presence_.push_back(std::make_unique<PresenceKeeper>([stub, request, what] {
      return std::make_unique<GrpcPresenceStream<v1::PresenceResponse>>(
          [stub, request](grpc::ClientContext* context) { return stub->Attend(context, request); },
          what);
    }));
  }
}

RetryPolicy Cluster::Impl::BestEffort() const {
  RetryPolicy once = options_.retry;
  once.max_attempts = 1;
  once.deadline = std::min(once.deadline, absl::Seconds(2));
  return once;
}

absl::Status Cluster::Impl::Leave() {
  // At exit: one short attempt per shard, no retries.
  v1::LeaveRequest request;
  request.set_worker_id(WorkerId());
  absl::Status left = ForEachShard([&](size_t i) {
    v1::LeaveResponse reply;
    return spotps::CallWithRetry(
        BestEffort(), absl::StrCat("shard ", i, " (", shards_[i]->address, ") Leave"),
        [&](grpc::ClientContext* ctx) { return shards_[i]->stub->Leave(ctx, request, &reply); });
  });
  // Only then the presence streams: closed first, they would tell the
  // shards that this worker broke off rather than that it left (either
  // stops it counting; the shards' logs say which).
  absl::MutexLock lock(&presence_mu_);
  presence_.clear();  // Each keeper stops as it goes.
  return left;
}

// ------------------------------------------------------ the public face

Cluster::Cluster(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Cluster::~Cluster() = default;

absl::StatusOr<InitOutcome> Cluster::Init(const ModelLayout& layout,
                                          absl::Span<const float> values) {
  return impl_->Init(layout, values);
}
absl::Status Cluster::FetchLayout() { return impl_->FetchLayout(); }
absl::StatusOr<int> Cluster::Join() { return impl_->Join(); }
absl::Status Cluster::WaitForLayout(absl::Duration timeout) {
  return impl_->WaitForLayout(timeout);
}
bool Cluster::has_layout() const { return impl_->has_layout_; }
const ModelLayout& Cluster::layout() const { return impl_->layout_; }
const PartitionMap& Cluster::partition_map() const { return impl_->map_; }
size_t Cluster::num_shards() const { return impl_->shards_.size(); }
const std::string& Cluster::shard_address(size_t shard) const {
  return impl_->shards_.at(shard)->address;
}
std::string Cluster::addresses() const { return impl_->Addresses(); }
const ChannelSecurity& Cluster::security() const { return impl_->options().security; }
absl::Status Cluster::Pull(v1::DType wire_dtype, WeightSnapshot* snapshot) {
  return impl_->Pull(wire_dtype, snapshot, PullOptions());
}
absl::Status Cluster::Pull(v1::DType wire_dtype, WeightSnapshot* snapshot,
                           const PullOptions& options) {
  return impl_->Pull(wire_dtype, snapshot, options);
}
absl::StatusOr<std::vector<float>> Cluster::PullTensor(absl::string_view name,
                                                       v1::DType wire_dtype) {
  return impl_->PullTensor(name, wire_dtype);
}
absl::StatusOr<PushResult> Cluster::Push(absl::Span<const float> gradient,
                                         absl::Span<const uint64_t> base_versions,
                                         v1::DType wire_dtype, std::string push_id) {
  return impl_->Push(gradient, base_versions, wire_dtype, std::move(push_id));
}
absl::StatusOr<PushResult> Cluster::PushTensors(
    const std::vector<std::pair<std::string, absl::Span<const float>>>& gradients,
    absl::Span<const uint64_t> base_versions, v1::DType wire_dtype, std::string push_id) {
  return impl_->PushTensors(gradients, base_versions, wire_dtype, std::move(push_id));
}
absl::StatusOr<std::unique_ptr<GradientStream>> Cluster::StartPush(
    absl::Span<const uint64_t> base_versions, v1::DType wire_dtype, std::string push_id) {
  return impl_->StartPush(base_versions, wire_dtype, std::move(push_id));
}
absl::StatusOr<std::vector<v1::StatsResponse>> Cluster::Stats() { return impl_->Stats(); }
absl::Status Cluster::Leave() { return impl_->Leave(); }
std::string Cluster::NewPushId() { return impl_->NewPushId(); }

}  // namespace spotps
