#include "ps/rpc/parameter_server_service.h"

#include <grpcpp/support/method_handler.h>

#include <algorithm>
#include <optional>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/chunk_frame.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/tensor_codec.h"
#include "common/transport_args.h"

namespace spotps {
namespace {

grpc::Status InvalidArgument(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

// What one Init or Push stream may carry, fixed before anything after its
// first message is read, so a hostile stream is cut off while it is small.
struct StreamLimits {
  const char* what = "";  // "init" or "push", for messages.
  int64_t max_payload_bytes = 0;
  const char* payload_bound = "";  // Where max_payload_bytes comes from.
  int64_t max_messages = 0;
  int64_t max_chunks = 0;
};

// Limits for a stream of at most `payload_bytes` split into at most `runs`
// runs (tensor pieces and partitions), under the stream rules of
// parameter_server.proto: a message per kMinStreamMessageBytes of payload,
// plus the first and the last; a chunk per run plus one per message border.
StreamLimits LimitsFor(const char* what, int64_t payload_bytes, const char* payload_bound,
                       int64_t runs) {
  StreamLimits limits;
  limits.what = what;
  limits.max_payload_bytes = payload_bytes;
  limits.payload_bound = payload_bound;
  limits.max_messages = 2 + payload_bytes / kMinStreamMessageBytes;
  limits.max_chunks = limits.max_messages + runs;
  return limits;
}

// The most payload bytes a push of `elements` in `dtype` carries: int8
// adds a scale per block and one per chunk that starts inside a block
// (chunks are bounded by the messages and the runs); twice the elements
// leaves room for those.
int64_t PushPayloadBound(v1::DType dtype, int64_t elements, int64_t runs) {
  if (dtype != v1::DTYPE_INT8) return elements * static_cast<int64_t>(WireBytesPerElement(dtype));
  return 2 * elements + 4 * (runs + 2);
}

// Reads the first message of a client stream; says why there is none.
template <typename Request>
grpc::Status ReadFirst(grpc::ServerContext* context, grpc::ServerReader<Request>* reader,
                       const char* what, Request* first) {
  if (reader->Read(first)) return grpc::Status::OK;
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        absl::StrFormat("%s stream was cancelled before its first message", what));
  }
  // gRPC's Read() reports a message it cannot parse like the end of the
  // stream, so both are possible.
  return InvalidArgument(absl::StrFormat(
      "%s stream ended before its first message (it sent none, or one that does not parse as a "
      "%s)",
      what, Request::descriptor()->full_name()));
}

// RESOURCE_EXHAUSTED once a stream has sent more than `limits` allow, given
// its counts so far (the message just read included).
grpc::Status CheckStreamBounds(const StreamLimits& limits, int64_t messages, int64_t chunks,
                               int64_t payload_bytes) {
  if (messages > limits.max_messages) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrFormat("%s stream sent more than %d messages, the most its %d payload bytes "
                        "allow (one per %d KiB, plus 2)",
                        limits.what, limits.max_messages, limits.max_payload_bytes,
                        kMinStreamMessageBytes >> 10));
  }
  if (chunks > limits.max_chunks) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrFormat("%s stream sent more than %d chunks, the most its %d "
                                        "messages and runs allow (chunks may not be empty)",
                                        limits.what, limits.max_chunks, limits.max_messages));
  }
  if (payload_bytes > limits.max_payload_bytes) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrFormat("%s stream carries more than the %d payload bytes %s", limits.what,
                        limits.max_payload_bytes, limits.payload_bound));
  }
  return grpc::Status::OK;
}

grpc::Status Cancelled(const char* what) {
  return grpc::Status(
      grpc::StatusCode::CANCELLED,
      absl::StrFormat("%s stream was cancelled (by the client, its deadline or a broken "
                      "connection) before it ended: nothing applied",
                      what));
}

// Until when a call may wait for an update before it answers with what
// there is: about as long as a "fresh" push waits for its averaged update
// (the shard's tick applies what waited HeldUpdateWaits(); twice that is
// ample), and no later than halfway to the call's deadline. A wait that ran
// up to the deadline would leave no time for the answer: the client would
// see DEADLINE_EXCEEDED and, retrying, wait the same way again.
absl::Time UpdateWaitEnd(const grpc::ServerContext& context, absl::Duration averaging_wait) {
  const absl::Time now = absl::Now();
  absl::Time end = now + 2 * averaging_wait + absl::Milliseconds(100);
  if (context.deadline() != std::chrono::system_clock::time_point::max()) {
    end = std::min(end, now + (absl::FromChrono(context.deadline()) - now) / 2);
  }
  return end;
}

// PushRequest.worker_id and InitRequest.init_id (parameter_server.proto).
constexpr size_t kMaxClientIdBytes = 128;

constexpr char kPushWithoutFirstMessage[] =
    "push stream ended before its first message (it sent none, or one that does not parse as a "
    "spotps.v1.PushRequest)";

// Reads the rest of a client stream of messages with `chunks` within
// `limits` (RESOURCE_EXHAUSTED as soon as one is crossed), then makes sure it
// ended normally (CANCELLED if the client cancelled, its deadline passed or
// its connection broke). Keeps the messages (they own the bytes) and returns
// views of their chunks.
template <typename Request>
grpc::Status ReadChunks(grpc::ServerContext* context, grpc::ServerReader<Request>* reader,
                        Request first, const StreamLimits& limits, std::vector<Request>* messages,
                        std::vector<PayloadRange>* ranges) {
  int64_t num_chunks = 0, payload_bytes = 0;
  Request next = std::move(first);
  do {
    num_chunks += next.chunks_size();
    for (const v1::PartitionChunk& c : next.chunks()) {
      payload_bytes += static_cast<int64_t>(c.data().size());
    }
    if (grpc::Status s = CheckStreamBounds(limits, static_cast<int64_t>(messages->size()) + 1,
                                           num_chunks, payload_bytes);
        !s.ok()) {
      return s;
    }
    messages->push_back(std::move(next));
  } while (reader->Read(&next));
  // Read() also returns false when the call was cancelled, expired or lost
  // its connection: what arrived may be any prefix of the stream.
  if (context->IsCancelled()) return Cancelled(limits.what);
  // Views are taken only after the vector stopped growing.
  for (const Request& m : *messages) {
    for (const v1::PartitionChunk& c : m.chunks()) {
      ranges->push_back(PayloadRange{c.partition_id(), c.offset(), c.data(), c.version()});
    }
  }
  return grpc::Status::OK;
}

// A local round (share_of_k) can outlast the silence allowed to a client
// that has pushed once: there an open presence stream keeps a trainer
// counted until its second push tells its pace.
RecentPushers::Options PushersOptions(const StalenessConfig& staleness) {
  RecentPushers::Options options;
  options.attendance_keeps_live = staleness.share_of_k;
  return options;
}

}  // namespace

grpc::Status ParameterServerService::GetLayout(grpc::ServerContext*, const v1::GetLayoutRequest*,
                                               v1::GetLayoutResponse* response) {
  response->set_num_shards(store_->options().num_shards);
  response->set_shard_index(store_->options().shard_index);
  response->set_initialized(store_->initialized());
  if (store_->initialized()) {
    *response->mutable_layout() = store_->layout().ToProto();
    response->set_layout_fingerprint(store_->layout().fingerprint());
  }
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::Init(grpc::ServerContext* context,
                                          grpc::ServerReader<v1::InitRequest>* reader,
                                          v1::InitResponse* response) {
  v1::InitRequest header;
  if (grpc::Status s = ReadFirst(context, reader, "init", &header); !s.ok()) return s;
  absl::StatusOr<ModelLayout> layout = ModelLayout::FromProto(header.layout());
  if (!layout.ok()) return ToGrpcStatus(layout.status());
  const ShardOptions& opts = store_->options();
  if (header.num_shards() != opts.num_shards || header.shard_index() != opts.shard_index) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrFormat("init is addressed to shard %d of %d, but this is shard %d of %d",
                        header.shard_index(), header.num_shards(), opts.shard_index,
                        opts.num_shards));
  }
  if (header.init_id().size() > kMaxClientIdBytes) {
    return InvalidArgument(absl::StrFormat("init_id has %d bytes, more than %d",
                                           header.init_id().size(), kMaxClientIdBytes));
  }
  const std::string init_id = header.init_id();
  response->set_layout_fingerprint(layout->fingerprint());
  // A losing racer learns the outcome, and a different model its refusal,
  // before sending its values; a retry of the Init that won learns it won.
  absl::StatusOr<bool> takes = store_->TakesInit(*layout);
  if (!takes.ok()) return ToGrpcStatus(takes.status());
  if (!*takes) {
    response->set_applied(store_->KeptInit(init_id));
    return grpc::Status::OK;
  }
  // Not initialised: the header's layout is the only one there is, so it
  // sets the bounds (ModelLayout caps its size).
  absl::StatusOr<PartitionMap> map = PartitionMap::Create(*layout, opts.num_shards);
  if (!map.ok()) return ToGrpcStatus(map.status());
  const StreamLimits limits =
      LimitsFor("init", map->ShardElements(opts.shard_index) * 4, "this shard's partitions hold",
                static_cast<int64_t>(map->PartitionsOfShard(opts.shard_index).size()));
  std::vector<v1::InitRequest> messages;
  std::vector<PayloadRange> ranges;
  if (grpc::Status s = ReadChunks(context, reader, std::move(header), limits, &messages, &ranges);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<bool> applied = store_->Init(*layout, ranges, init_id);
  if (!applied.ok()) return ToGrpcStatus(applied.status());
  response->set_applied(*applied || store_->KeptInit(init_id));
  if (*applied) updates_.Notify();
  return grpc::Status::OK;
}

ParameterServerService::ParameterServerService(ShardStore* store, ShardCheckpointer* checkpointer,
                                               uint64_t incarnation, ShardMetrics* metrics,
                                               int max_watchers)
    : store_(store),
      checkpointer_(checkpointer),
      incarnation_(incarnation),
      metrics_(metrics),
      updates_(max_watchers),
      pushers_(PushersOptions(store->staleness())) {
  // Indices in the order of the rpcs in parameter_server.proto. gRPC calls
  // these handlers "streamed"; to the server that only means it does not
  // read a request before the handler runs, which the handlers do themselves.
  constexpr int kPullMethod = 2, kPushMethod = 3;
  MarkMethodStreamed(
      kPullMethod,
      new grpc::internal::SplitServerStreamingHandler<v1::PullRequest, grpc::ByteBuffer>(
          [this](grpc::ServerContext* context,
                 grpc::ServerSplitStreamer<v1::PullRequest, grpc::ByteBuffer>* stream) {
            return PullFrames(context, stream);
          }));
  MarkMethodStreamed(
      kPushMethod,
      new grpc::internal::ClientStreamingHandler<ParameterServerService, grpc::ByteBuffer,
                                                 v1::PushResponse>(
          [](ParameterServerService* service, grpc::ServerContext* context,
             grpc::ServerReader<grpc::ByteBuffer>* reader,
             v1::PushResponse* response) { return service->PushFrames(context, reader, response); },
          this));
}

grpc::Status ParameterServerService::PullFrames(
    grpc::ServerContext* context,
    grpc::ServerSplitStreamer<v1::PullRequest, grpc::ByteBuffer>* stream) {
  const absl::Time start = absl::Now();
  v1::PullRequest request;
  grpc::Status status =
      stream->Read(&request)
          ? ServePull(context, &request, stream)
          : InvalidArgument(
                "pull stream carried no request that parses as a spotps.v1.PullRequest");
  if (metrics_ != nullptr) metrics_->ObservePull(absl::Now() - start, status);
  return status;
}

grpc::Status ParameterServerService::PushFrames(grpc::ServerContext* context,
                                                grpc::ServerReader<grpc::ByteBuffer>* reader,
                                                v1::PushResponse* response) {
  const absl::Time start = absl::Now();
  absl::Duration apply = absl::ZeroDuration();
  grpc::Status status = ServePush(context, reader, response, &apply);
  if (metrics_ != nullptr) {
    metrics_->ObservePush(absl::Now() - start, apply, status);
    if (status.ok() && !response->duplicate()) {
      for (uint64_t staleness : response->staleness()) metrics_->ObserveStaleness(staleness);
    }
  }
  return status;
}

grpc::Status ParameterServerService::ServePull(
    grpc::ServerContext* context, const v1::PullRequest* request,
    grpc::ServerSplitStreamer<v1::PullRequest, grpc::ByteBuffer>* stream) {
  if (!store_->initialized()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "model is not initialised on this shard: a trainer must call Init first");
  }
  if (!IsValidWireDType(request->dtype())) {
    return InvalidArgument(absl::StrFormat("unsupported pull dtype %d", request->dtype()));
  }
  std::vector<uint32_t> ids(request->partition_ids().begin(), request->partition_ids().end());
  if (ids.empty()) ids = store_->owned_partitions();
  if (request->known_versions_size() != 0 &&
      request->known_versions_size() != request->partition_ids_size()) {
    return InvalidArgument(absl::StrFormat("pull lists %d known versions for %d partitions",
                                           request->known_versions_size(),
                                           request->partition_ids_size()));
  }
  if (request->min_versions_size() != 0 &&
      request->min_versions_size() != request->partition_ids_size()) {
    return InvalidArgument(absl::StrFormat("pull lists %d minimum versions for %d partitions",
                                           request->min_versions_size(),
                                           request->partition_ids_size()));
  }
  // A pull that waits for updates (its push may have been a duplicate, in
  // no update at all) sends what there is once the wait ends.
  const absl::Time wait_until = UpdateWaitEnd(*context, HeldUpdateWaits().update);
  std::set<uint32_t> unique_ids;
  for (uint32_t id : ids) {
    if (!unique_ids.insert(id).second) {
      return InvalidArgument(absl::StrFormat("pull lists partition %d twice", id));
    }
    if (absl::StatusOr<uint64_t> v = store_->Version(id); !v.ok()) return ToGrpcStatus(v.status());
  }
  UseSingleThreadedConversion();
  const size_t width = WireBytesPerElement(request->dtype());
  v1::PullResponse header;  // Every field but the chunks.
  header.set_dtype(request->dtype());
  const std::string fields = header.SerializeAsString();
  int64_t bytes = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "pull cancelled");
    if (request->min_versions_size() != 0) {
      store_->WaitForVersion(ids[i], request->min_versions(static_cast<int>(i)), wait_until);
    }
    if (request->known_versions_size() != 0 &&
        *store_->Version(ids[i]) == request->known_versions(static_cast<int>(i))) {
      continue;
    }
    const size_t payload =
        static_cast<size_t>(store_->partition_map().partitions()[ids[i]].num_elements) * width;
    // The partition is encoded straight into the message's slice.
    std::optional<ChunkFrameWriter> frame;
    absl::StatusOr<uint64_t> version =
        store_->ReadTo(ids[i], request->dtype(), [&](uint64_t version) {
          frame.emplace(fields, kPullChunksField,
                        std::vector<ChunkHeader>{{ids[i], 0, version, payload}});
          return frame->payload(0);
        });
    if (!version.ok()) return ToGrpcStatus(version.status());
    bytes += static_cast<int64_t>(payload);
    if (!stream->Write(frame->Take())) break;  // The client went away.
  }
  store_->CountPull(bytes);
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::ServePush(grpc::ServerContext* context,
                                               grpc::ServerReader<grpc::ByteBuffer>* reader,
                                               v1::PushResponse* response, absl::Duration* apply) {
  if (!store_->initialized()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "model is not initialised on this shard: a trainer must call Init first");
  }
  // Each message's chunks are parsed in place (common/chunk_frame.h); its
  // other fields go through protobuf, so they are checked as before.
  grpc::ByteBuffer buffer;
  ChunkFrameReader frame;
  v1::PushRequest header;
  // Before the announcement is known, the chunks of the first message are
  // bounded by what a push of every partition of this shard may carry.
  int64_t max_chunks = LimitsFor("push", store_->owned_elements() * 4, "",
                                 static_cast<int64_t>(store_->layout().tensors().size() +
                                                      store_->owned_partitions().size()))
                           .max_chunks;
  int64_t num_messages = 0, num_chunks = 0, payload_bytes = 0;
  auto parse = [&](v1::PushRequest* fields) {
    return frame.Parse(&buffer, kPushChunksField, static_cast<size_t>(max_chunks - num_chunks)) &&
           fields->ParseFromString(frame.fields());
  };
  if (!reader->Read(&buffer)) {
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED,
                          "push stream was cancelled before its first message");
    }
    return InvalidArgument(kPushWithoutFirstMessage);
  }
  if (!parse(&header)) return InvalidArgument(kPushWithoutFirstMessage);
  if (frame.truncated()) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrFormat("push stream's first message carries more than %d chunks, the most a push "
                        "of every partition of this shard may carry",
                        max_chunks));
  }
  const v1::DType dtype = header.dtype();
  if (!IsValidPushDType(dtype)) {
    return InvalidArgument(absl::StrFormat(
        "unsupported gradient dtype %d (expected DTYPE_FP32, DTYPE_BF16 or DTYPE_INT8)", dtype));
  }
  // The announcement, checked against this shard's own partitions, bounds
  // the stream and is what the chunks must cover exactly.
  AnnouncedElements announced;
  int64_t announced_elements = 0;
  for (const v1::PartitionCount& c : header.announced()) {
    if (!announced.emplace(c.partition_id(), c.num_elements()).second) {
      return InvalidArgument(
          absl::StrFormat("push announces partition %d twice", c.partition_id()));
    }
  }
  if (absl::Status s = store_->CheckAnnounced(announced); !s.ok()) return ToGrpcStatus(s);
  for (const auto& [id, n] : announced) announced_elements += static_cast<int64_t>(n);
  const int64_t runs = static_cast<int64_t>(store_->layout().tensors().size() + announced.size());
  const StreamLimits limits = LimitsFor("push", PushPayloadBound(dtype, announced_elements, runs),
                                        "its first message announced", runs);
  const std::string push_id = header.push_id();
  if (header.worker_id().size() > kMaxClientIdBytes) {
    return InvalidArgument(absl::StrFormat("push's worker_id has %d bytes, more than %d",
                                           header.worker_id().size(), kMaxClientIdBytes));
  }
  // Payloads are copied out of gRPC's buffers as each message arrives, and
  // applied only after the stream ended normally (parameter_server.proto).
  PushStaging staging(&staging_, announced, dtype);
  max_chunks = limits.max_chunks;
  v1::PushRequest later_fields;
  float gradient_scale = header.gradient_scale();  // 0: not sent (yet).
  do {
    if (later_fields.gradient_scale() != 0.0f) {
      if (gradient_scale != 0.0f) {
        return InvalidArgument("push sets gradient_scale in more than one message");
      }
      gradient_scale = later_fields.gradient_scale();
    }
    num_messages += 1;
    num_chunks += static_cast<int64_t>(frame.chunks().size());
    payload_bytes += static_cast<int64_t>(frame.payload_bytes());
    if (grpc::Status s = CheckStreamBounds(limits, num_messages, num_chunks, payload_bytes);
        !s.ok()) {
      return s;
    }
    for (const ChunkView& chunk : frame.chunks()) {
      if (absl::Status s = staging.Add(chunk); !s.ok()) return ToGrpcStatus(s);
    }
    // Read() returns false at the stream's end and when the call was
    // cancelled, expired or lost its connection; a message that does not
    // parse ends the stream too, as protobuf's reader did.
  } while (reader->Read(&buffer) && parse(&later_fields));
  if (context->IsCancelled()) {
    // Most often its client was killed mid-push (a spot reclaim): stop
    // counting it, so that "fresh" updates stop waiting for it now rather
    // than after its silence. A live client that retries counts again.
    StopCounting(header.worker_id(), "its push was cut off");
    return Cancelled("push");
  }
  // A worker not counted yet is counted before its push is taken, so that
  // k already holds it when the store places the push (averaged_updates.h).
  const bool new_worker = pushers_.Announce(header.worker_id(), absl::Now());
  if (new_worker) RecountPushers(header.worker_id(), "counts from its first push");
  const absl::Time apply_start = absl::Now();
  absl::StatusOr<PushOutcome> outcome = store_->Push(
      push_id, staging.staged_dtype(), staging.ranges(), &announced,
      gradient_scale == 0.0f ? 1.0f : gradient_scale, PushSender{header.worker_id(), new_worker});
  *apply = absl::Now() - apply_start;
  if (!outcome.ok()) {
    // A refused push counts nobody: invented names would hold every update.
    if (new_worker) StopCounting(header.worker_id(), "its first push was refused");
    return ToGrpcStatus(outcome.status());
  }
  // Counted only once accepted: a refused push changes no counter but the
  // store's rejection counts.
  store_->CountPushBytes(payload_bytes);
  if (!outcome->duplicate) pushers_.Record(header.worker_id(), absl::Now());
  if (outcome->averaged_later && store_->staleness().fresh) {
    AwaitFreshWeights(*context, new_worker, &*outcome);
  }
  // A duplicate that stood in for a push may have completed an update.
  if (!outcome->deferred && (!outcome->duplicate || outcome->averaged_later)) updates_.Notify();
  response->set_duplicate(outcome->duplicate);
  response->set_compute_on_fresh_weights(store_->staleness().fresh);
  response->set_deferred(outcome->deferred);
  response->set_global_step(outcome->global_step);
  for (size_t i = 0; i < outcome->partition_ids.size(); ++i) {
    response->add_partition_ids(outcome->partition_ids[i]);
    response->add_new_versions(outcome->new_versions[i]);
    response->add_staleness(outcome->staleness[i]);
  }
  return grpc::Status::OK;
}

void ParameterServerService::RecountPushers(absl::string_view worker, absl::string_view change) {
  const int live = RecentWorkers();
  store_->SetLiveWorkers(live);
  LogMembership(worker, change, live);
}

bool ParameterServerService::StopCounting(absl::string_view worker, absl::string_view why) {
  if (!pushers_.Forget(worker)) return false;
  const int live = RecentWorkers();
  store_->StopCounting(worker, live);
  LogMembership(worker, absl::StrCat("stops counting: ", why), live);
  return true;
}

void ParameterServerService::LogMembership(absl::string_view worker, absl::string_view change,
                                           int live) const {
  // Only averaging waits for the live workers; elsewhere a client pushing
  // now and then would log a line each time.
  if (!store_->staleness().average) return;
  LogInfoF("shard %d: worker %s %s at %s; %d live workers", store_->options().shard_index,
           absl::CHexEscape(worker), change, ClockTime(absl::Now()), live);
}

AveragingWaits ParameterServerService::HeldUpdateWaits() {
  const StalenessConfig& how = store_->staleness();
  const bool local = how.average && how.share_of_k;
  return AveragingWaitsFor(how, local ? pushers_.MedianInterval() : absl::ZeroDuration());
}

void ParameterServerService::AwaitFreshWeights(const grpc::ServerContext& context, bool new_worker,
                                               PushOutcome* outcome) {
  // Past the wait the push stays held and is answered as "avg" answers. A
  // new worker's may be in an update that waits for a round (local mode);
  // answered before it, its trainer would push its next round into it.
  const AveragingWaits waits = HeldUpdateWaits();
  const absl::Time end =
      UpdateWaitEnd(context, new_worker ? waits.new_workers_round : waits.update);
  if (!store_->WaitForAveragedUpdate(outcome->average_update, end)) return;
  for (size_t i = 0; i < outcome->partition_ids.size(); ++i) {
    outcome->new_versions[i] = *store_->Version(outcome->partition_ids[i]);
  }
  outcome->global_step = store_->global_step();
}

grpc::Status ParameterServerService::Stats(grpc::ServerContext*, const v1::StatsRequest*,
                                           v1::StatsResponse* response) {
  store_->FillStats(response);
  response->set_incarnation(incarnation_);
  response->set_live_pushers(static_cast<uint32_t>(RecentWorkers()));
  if (store_->staleness().average) {
    response->set_average_wait_ms(
        static_cast<uint32_t>(absl::ToInt64Milliseconds(HeldUpdateWaits().update)));
  }
  if (checkpointer_ != nullptr) {
    response->set_restored_checkpoint_id(checkpointer_->restored_id());
    response->set_last_checkpoint_id(checkpointer_->last_written_id());
    const ShardCheckpointer::Failure failure = checkpointer_->last_failure();
    if (!failure.message.empty()) {
      response->set_last_checkpoint_error(failure.message);
      response->set_last_checkpoint_error_unix_ms(absl::ToUnixMillis(failure.time));
    }
  }
  return grpc::Status::OK;
}

namespace {

grpc::Status CheckWorkerId(const char* what, const std::string& worker_id) {
  if (worker_id.empty() || worker_id.size() > kMaxClientIdBytes) {
    return InvalidArgument(absl::StrFormat("%s names a worker_id of %d bytes: want 1 to %d", what,
                                           worker_id.size(), kMaxClientIdBytes));
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::Status ParameterServerService::Join(grpc::ServerContext*, const v1::JoinRequest* request,
                                          v1::JoinResponse* response) {
  if (grpc::Status s = CheckWorkerId("join", request->worker_id()); !s.ok()) return s;
  if (store_->global_step() > 0) return grpc::Status::OK;  // Counted from its first push.
  if (pushers_.Announce(request->worker_id(), absl::Now())) {
    RecountPushers(request->worker_id(), "counts from its join");
  }
  response->set_counted(true);
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::Leave(grpc::ServerContext*, const v1::LeaveRequest* request,
                                           v1::LeaveResponse* response) {
  if (grpc::Status s = CheckWorkerId("leave", request->worker_id()); !s.ok()) return s;
  response->set_known(StopCounting(request->worker_id(), "it left"));
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::Attend(grpc::ServerContext* context,
                                            const v1::PresenceRequest* request,
                                            grpc::ServerWriter<v1::PresenceResponse>* writer) {
  if (grpc::Status s = CheckWorkerId("presence", request->worker_id()); !s.ok()) return s;
  if (grpc::Status admitted = presence_.Admit(); !admitted.ok()) return admitted;
  absl::Cleanup release = [this] { presence_.Release(); };
  pushers_.Attend(request->worker_id());
  const PresenceStreams::End end = writer->Write(v1::PresenceResponse())
                                       ? presence_.Hold(*context)
                                       : PresenceStreams::End::kBroken;
  pushers_.Depart(request->worker_id());
  // A killed trainer's connection breaks here before it would fall silent
  // for three push intervals: updates stop waiting for it now.
  if (end == PresenceStreams::End::kBroken) {
    StopCounting(request->worker_id(), "its presence stream broke");
  }
  return presence_.StatusFor(end);
}

grpc::Status ParameterServerService::WriteCheckpoint(grpc::ServerContext*,
                                                     const v1::WriteCheckpointRequest* request,
                                                     v1::WriteCheckpointResponse* response) {
  if (checkpointer_ == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this shard runs without --checkpoint_dir");
  }
  // Shard 0's round always learns every peer's incarnation first, so 0 is
  // never a real round's: it must not switch the restart check off.
  if (request->expected_incarnation() == 0) {
    return InvalidArgument("expected_incarnation is required (the incarnation from Stats)");
  }
  if (request->expected_incarnation() != incarnation_) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this shard restarted after the checkpoint round began");
  }
  absl::StatusOr<CheckpointWriteResult> written =
      checkpointer_->Write(request->checkpoint_id(), *store_, "");
  if (!written.ok()) return ToGrpcStatus(written.status());
  response->set_bytes(written->bytes);
  response->set_seconds(written->seconds);
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::ApplyRound(grpc::ServerContext*,
                                                const v1::ApplyRoundRequest* request,
                                                v1::ApplyRoundResponse* response) {
  const std::vector<std::string> push_ids(request->push_ids().begin(), request->push_ids().end());
  absl::StatusOr<RoundOutcome> outcome = store_->ApplyRound(push_ids);
  if (!outcome.ok()) return ToGrpcStatus(outcome.status());
  response->set_already_applied(outcome->already_applied);
  response->set_global_step(outcome->global_step);
  if (!outcome->already_applied) updates_.Notify();
  return grpc::Status::OK;
}

void ParameterServerService::FillWatchResponse(const std::vector<uint32_t>& ids,
                                               v1::WatchResponse* response) const {
  response->Clear();
  for (uint32_t id : ids) {
    v1::PartitionStats* p = response->add_partitions();
    p->set_partition_id(id);
    p->set_version(store_->Version(id).value_or(0));  // Ids were checked: owned.
    p->set_num_elements(
        static_cast<uint64_t>(store_->partition_map().partitions()[id].num_elements));
  }
  v1::StatsResponse stats;
  store_->FillStats(&stats);
  response->set_global_step(stats.global_step());
  response->set_incarnation(incarnation_);
  if (checkpointer_ == nullptr) return;
  const ShardCheckpointer::WrittenVersions written = checkpointer_->last_written_versions();
  if (written.id == 0) return;
  response->set_last_checkpoint_id(written.id);
  for (uint32_t id : ids) {
    auto it = std::lower_bound(written.versions.begin(), written.versions.end(),
                               std::make_pair(id, uint64_t{0}));
    response->add_checkpoint_versions(
        it != written.versions.end() && it->first == id ? it->second : ~uint64_t{0});
  }
}

uint64_t ParameterServerService::LastCheckpointId() const {
  return checkpointer_ == nullptr ? 0 : checkpointer_->last_written_id();
}

grpc::Status ParameterServerService::Watch(grpc::ServerContext* context,
                                           const v1::WatchRequest* request,
                                           grpc::ServerWriter<v1::WatchResponse>* writer) {
  if (!store_->initialized()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "model is not initialised on this shard: a trainer must call Init first");
  }
  std::vector<uint32_t> ids(request->partition_ids().begin(), request->partition_ids().end());
  if (ids.empty()) ids = store_->owned_partitions();
  std::set<uint32_t> unique_ids;
  for (uint32_t id : ids) {
    if (!unique_ids.insert(id).second) {
      return InvalidArgument(absl::StrFormat("watch lists partition %d twice", id));
    }
    if (absl::StatusOr<uint64_t> v = store_->Version(id); !v.ok()) return ToGrpcStatus(v.status());
  }
  if (!updates_.Admit()) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrFormat("this shard already serves its limit of %d watchers (or is shutting "
                        "down): try again later",
                        updates_.max_watchers()));
  }
  absl::Cleanup release = [this] { updates_.Release(); };
  const absl::Duration asked = absl::Milliseconds(request->max_duration_ms());
  const absl::Time end =
      absl::Now() +
      (asked == absl::ZeroDuration() ? kMaxWatchDuration : std::min(asked, kMaxWatchDuration));
  // The counter is read before the versions, so a change after this read
  // wakes the loop even if the first message already shows it.
  uint64_t seen = updates_.count(), seen_before = seen, step_before = store_->global_step();
  bool settling = false;
  v1::WatchResponse sent, now;
  FillWatchResponse(ids, &sent);
  if (!writer->Write(sent)) return grpc::Status(grpc::StatusCode::CANCELLED, "watcher went away");
  while (true) {
    // Short waits, so a cancelled or expired stream is noticed promptly.
    seen = updates_.WaitForChange(seen, std::min(end, absl::Now() + absl::Milliseconds(100)));
    if (updates_.shut_down()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shard is shutting down");
    }
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled");
    if (absl::Now() >= end) return grpc::Status::OK;
    // Shard 0 applies its own sync rounds and writes its own checkpoints
    // past this service, so the step and the checkpoint id are compared
    // too. The step moves before the versions do: after a change, the
    // versions are read again on the next wake until they stand still.
    const uint64_t step = store_->global_step();
    const uint64_t checkpoint = LastCheckpointId();
    if (seen == seen_before && step == step_before && checkpoint == sent.last_checkpoint_id() &&
        !settling) {
      continue;
    }
    seen_before = seen;
    step_before = step;
    FillWatchResponse(ids, &now);
    bool changed = now.last_checkpoint_id() != sent.last_checkpoint_id();
    for (int i = 0; i < now.partitions_size(); ++i) {
      changed = changed || now.partitions(i).version() != sent.partitions(i).version();
    }
    settling = changed;
    if (!changed) continue;
    sent.Swap(&now);
    if (!writer->Write(sent)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "watcher went away");
    }
  }
}

}  // namespace spotps
