#include "ps/rpc/parameter_server_service.h"

#include <set>

#include "absl/strings/str_format.h"
#include "common/grpc_status.h"
#include "common/tensor_codec.h"

namespace spotps {
namespace {

grpc::Status InvalidArgument(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

// Reads a client stream of messages with `chunks`, refusing to buffer more
// payload than `max_bytes`. Keeps the messages (they own the bytes) and
// returns views of their chunks.
template <typename Request>
int64_t PayloadBytes(const Request& m) {
  int64_t total = 0;
  for (const v1::PartitionChunk& c : m.chunks()) total += static_cast<int64_t>(c.data().size());
  return total;
}

// Reads a client stream of messages with `chunks`, refusing to buffer more
// payload than `max_bytes`. Keeps the messages (they own the bytes) and
// returns views of their chunks.
template <typename Request>
grpc::Status ReadChunks(grpc::ServerReader<Request>* reader, Request first, int64_t max_bytes,
                        std::vector<Request>* messages, std::vector<PayloadRange>* ranges) {
  int64_t total = PayloadBytes(first);
  messages->push_back(std::move(first));
  Request next;
  while (total <= max_bytes && reader->Read(&next)) {
    total += PayloadBytes(next);
    messages->push_back(std::move(next));
  }
  if (total > max_bytes) {
    return InvalidArgument(absl::StrFormat(
        "stream carries more than the %d payload bytes this shard holds", max_bytes));
  }
  // Views are taken only after the vector stopped growing.
  for (const Request& m : *messages) {
    for (const v1::PartitionChunk& c : m.chunks()) {
      ranges->push_back(PayloadRange{c.partition_id(), c.offset(), c.data(), c.version()});
    }
  }
  return grpc::Status::OK;
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

grpc::Status ParameterServerService::Init(grpc::ServerContext*,
                                          grpc::ServerReader<v1::InitRequest>* reader,
                                          v1::InitResponse* response) {
  v1::InitRequest header;
  if (!reader->Read(&header)) return InvalidArgument("init stream is empty");
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
  response->set_layout_fingerprint(layout->fingerprint());
  // A losing racer learns the outcome before sending its values.
  if (store_->initialized() && store_->layout().fingerprint() == layout->fingerprint()) {
    response->set_applied(false);
    return grpc::Status::OK;
  }
  absl::StatusOr<PartitionMap> map = PartitionMap::Create(*layout, opts.num_shards);
  if (!map.ok()) return ToGrpcStatus(map.status());
  std::vector<v1::InitRequest> messages;
  std::vector<PayloadRange> ranges;
  const int64_t max_bytes = map->ShardElements(opts.shard_index) * 4;
  if (grpc::Status s = ReadChunks(reader, std::move(header), max_bytes, &messages, &ranges);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<bool> applied = store_->Init(*layout, ranges);
  if (!applied.ok()) return ToGrpcStatus(applied.status());
  response->set_applied(*applied);
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::Pull(grpc::ServerContext* context,
                                          const v1::PullRequest* request,
                                          grpc::ServerWriter<v1::PullResponse>* writer) {
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
  std::set<uint32_t> unique_ids;
  for (uint32_t id : ids) {
    if (!unique_ids.insert(id).second) {
      return InvalidArgument(absl::StrFormat("pull lists partition %d twice", id));
    }
    if (absl::StatusOr<uint64_t> v = store_->Version(id); !v.ok()) return ToGrpcStatus(v.status());
  }
  UseSingleThreadedConversion();
  int64_t bytes = 0;
  v1::PullResponse response;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "pull cancelled");
    if (request->known_versions_size() != 0 &&
        *store_->Version(ids[i]) == request->known_versions(static_cast<int>(i))) {
      continue;
    }
    response.Clear();
    response.set_dtype(request->dtype());
    v1::PartitionChunk* chunk = response.add_chunks();
    chunk->set_partition_id(ids[i]);
    absl::StatusOr<uint64_t> version =
        store_->Read(ids[i], request->dtype(), chunk->mutable_data());
    if (!version.ok()) return ToGrpcStatus(version.status());
    chunk->set_version(*version);
    bytes += static_cast<int64_t>(chunk->data().size());
    if (!writer->Write(response)) break;  // The client went away.
  }
  store_->CountPull(bytes);
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::Push(grpc::ServerContext*,
                                          grpc::ServerReader<v1::PushRequest>* reader,
                                          v1::PushResponse* response) {
  if (!store_->initialized()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "model is not initialised on this shard: a trainer must call Init first");
  }
  v1::PushRequest header;
  if (!reader->Read(&header)) return InvalidArgument("push stream is empty");
  const v1::DType dtype = header.dtype();
  const size_t width = WireBytesPerElement(dtype);
  if (width == 0) {
    return InvalidArgument(absl::StrFormat(
        "unsupported gradient dtype %d (expected DTYPE_FP32 or DTYPE_BF16)", dtype));
  }
  const std::string push_id = header.push_id();
  std::vector<v1::PushRequest> messages;
  std::vector<PayloadRange> ranges;
  const int64_t max_bytes = store_->owned_elements() * static_cast<int64_t>(width);
  if (grpc::Status s = ReadChunks(reader, std::move(header), max_bytes, &messages, &ranges);
      !s.ok()) {
    return s;
  }
  int64_t bytes = 0;
  for (const PayloadRange& r : ranges) bytes += static_cast<int64_t>(r.bytes.size());
  store_->CountPushBytes(bytes);
  absl::StatusOr<PushOutcome> outcome = store_->Push(push_id, dtype, ranges);
  if (!outcome.ok()) return ToGrpcStatus(outcome.status());
  response->set_duplicate(outcome->duplicate);
  response->set_deferred(outcome->deferred);
  response->set_global_step(outcome->global_step);
  for (size_t i = 0; i < outcome->partition_ids.size(); ++i) {
    response->add_partition_ids(outcome->partition_ids[i]);
    response->add_new_versions(outcome->new_versions[i]);
    response->add_staleness(outcome->staleness[i]);
  }
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::Stats(grpc::ServerContext*, const v1::StatsRequest*,
                                           v1::StatsResponse* response) {
  store_->FillStats(response);
  response->set_incarnation(incarnation_);
  if (checkpointer_ != nullptr) {
    response->set_restored_checkpoint_id(checkpointer_->restored_id());
    response->set_last_checkpoint_id(checkpointer_->last_written_id());
  }
  return grpc::Status::OK;
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
  return grpc::Status::OK;
}

}  // namespace spotps
