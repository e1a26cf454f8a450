#include "client/gradient_stream.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/chunk_frame.h"
#include "common/grpc_status.h"
#include "common/tensor_codec.h"
#include "common/transport_args.h"

namespace spotps {
namespace {

// One shard's stream: the chunks queued for its next message, and whether
// its first message (the header) went out.
struct ShardLane {
  ShardConnection* shard = nullptr;
  size_t index = 0;
  grpc::ClientContext context;
  ShardPushReply reply;
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer;
  v1::PushRequest header;
  bool header_sent = false;
  bool broken = false;  // A write failed: Finish() says why.
  std::vector<ChunkHeader> chunks;
  std::vector<const float*> values;
  int64_t pending = 0;  // Elements queued.
};

class ShardStreams final : public GradientStream {
 public:
  ShardStreams(const std::vector<ShardConnection*>& shards, const PartitionMap& map,
               absl::Span<const uint64_t> base_versions, const GradientStreamOptions& options);
  ~ShardStreams() override;

  void Announce() override;
  void Send(uint32_t partition_id, const float* values) override;
  absl::StatusOr<PushResult> Finish(float gradient_scale,
                                    const std::function<void()>& after_sent) override;

 private:
  // Writes the queued chunks as one message, after `fields` (every field
  // but the chunks, in wire format).
  void Flush(ShardLane& lane, const std::string& fields);

  const PartitionMap& map_;
  const std::vector<uint64_t> base_versions_;
  const GradientStreamOptions options_;
  const int64_t width_;
  const int64_t per_message_;  // Elements.
  std::vector<std::unique_ptr<ShardLane>> lanes_;  // By shard index; null: no partitions.
  std::vector<char> sent_;                         // By partition id.
  bool finished_ = false;
};

ShardStreams::ShardStreams(const std::vector<ShardConnection*>& shards, const PartitionMap& map,
                           absl::Span<const uint64_t> base_versions,
                           const GradientStreamOptions& options)
    : map_(map),
      base_versions_(base_versions.begin(), base_versions.end()),
      options_(options),
      width_(static_cast<int64_t>(WireBytesPerElement(options.dtype))),
      per_message_(std::max(kMinStreamMessageBytes, options.message_bytes) / width_),
      lanes_(shards.size()),
      sent_(map.partitions().size(), 0) {
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::vector<uint32_t> ids = map.PartitionsOfShard(static_cast<uint32_t>(i));
    if (ids.empty()) continue;
    auto lane = std::make_unique<ShardLane>();
    lane->shard = shards[i];
    lane->index = i;
    std::map<uint32_t, int64_t> announced;
    for (uint32_t id : ids) {
      announced[id] = map.partitions()[id].num_elements;
      lane->reply.bytes += map.partitions()[id].num_elements * width_;
    }
    lane->reply.contacted = true;
    lane->header = PushHeader(options.push_id, options.dtype, options.worker_id, announced);
    lane->context.set_deadline(absl::ToChronoTime(absl::Now() + options.deadline));
    // The call's metadata goes out with its first message, not before.
    lane->context.set_initial_metadata_corked(true);
    lane->writer.reset(grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
        lane->shard->channel.get(), lane->shard->push_method, &lane->context,
        &lane->reply.reply));
    lanes_[i] = std::move(lane);
  }
}

ShardStreams::~ShardStreams() {
  if (finished_) return;
  for (std::unique_ptr<ShardLane>& lane : lanes_) {
    if (lane == nullptr) continue;
    lane->context.TryCancel();  // The shard applies nothing of a cancelled push.
    lane->writer->Finish().IgnoreError();
  }
}

void ShardStreams::Flush(ShardLane& lane, const std::string& fields) {
  ChunkFrameWriter frame(fields, kPushChunksField, lane.chunks);
  for (size_t c = 0; c < lane.chunks.size(); ++c) {
    EncodeFp32(lane.values[c], static_cast<int64_t>(lane.chunks[c].payload_bytes) / width_,
               options_.dtype, frame.payload(c));
  }
  lane.chunks.clear();
  lane.values.clear();
  lane.pending = 0;
  lane.header_sent = true;
  if (!lane.broken && !lane.writer->Write(frame.Take())) lane.broken = true;
}

void ShardStreams::Announce() {
  if (finished_) return;
  // Every later message but the last holds at least kMinStreamMessageBytes,
  // so the shard's message bound (2 + payload / that) still holds.
  for (std::unique_ptr<ShardLane>& lane : lanes_) {
    if (lane != nullptr && !lane->header_sent) Flush(*lane, lane->header.SerializeAsString());
  }
}

void ShardStreams::Send(uint32_t partition_id, const float* values) {
  if (finished_ || partition_id >= sent_.size() || sent_[partition_id]) return;
  sent_[partition_id] = 1;
  SingleThreadedConversionScope one_thread;
  const Partition& p = map_.partitions()[partition_id];
  ShardLane& lane = *lanes_[p.shard];
  auto fields = [&lane] {
    return lane.header_sent ? std::string() : lane.header.SerializeAsString();
  };
  for (int64_t done = 0; done < p.num_elements;) {
    const int64_t n = std::min(per_message_ - lane.pending, p.num_elements - done);
    lane.chunks.push_back(ChunkHeader{partition_id, static_cast<uint64_t>(done),
                                      base_versions_[partition_id],
                                      static_cast<size_t>(n * width_)});
    lane.values.push_back(values + done);
    done += n;
    lane.pending += n;
    if (lane.pending == per_message_) Flush(lane, fields());
  }
  // Out as soon as it makes a message the shard accepts before the last.
  if (lane.pending * width_ >= kMinStreamMessageBytes) Flush(lane, fields());
}

absl::StatusOr<PushResult> ShardStreams::Finish(float gradient_scale,
                                                const std::function<void()>& after_sent) {
  if (finished_) return absl::FailedPreconditionError("GradientStream: finished already");
  for (size_t id = 0; id < sent_.size(); ++id) {
    if (!sent_[id]) {
      return absl::FailedPreconditionError(
          absl::StrFormat("GradientStream: partition %d was not sent", id));
    }
  }
  finished_ = true;
  SingleThreadedConversionScope one_thread;
  // Every stream is closed before any answer is awaited: the shards apply
  // their parts at the same time.
  for (std::unique_ptr<ShardLane>& lane : lanes_) {
    if (lane == nullptr) continue;
    v1::PushRequest last;
    if (!lane->header_sent) last = lane->header;
    if (gradient_scale != 1.0f) last.set_gradient_scale(gradient_scale);
    Flush(*lane, last.SerializeAsString());
    if (!lane->broken && !lane->writer->WritesDone()) lane->broken = true;
  }
  if (after_sent) after_sent();
  absl::Status first_error;
  std::vector<ShardPushReply> replies;
  for (std::unique_ptr<ShardLane>& lane : lanes_) {
    if (lane == nullptr) continue;
    const grpc::Status s = lane->writer->Finish();
    if (!s.ok() && first_error.ok()) {
      first_error = absl::Status(FromGrpcStatus(s).code(),
                                 absl::StrCat("shard ", lane->index, " (", lane->shard->address,
                                              ") Push: ", s.error_message()));
    }
    replies.push_back(lane->reply);
  }
  if (!first_error.ok()) return first_error;
  return CombinePushReplies(replies, map_.partitions().size());
}

}  // namespace

std::unique_ptr<GradientStream> OpenGradientStream(const std::vector<ShardConnection*>& shards,
                                                   const PartitionMap& map,
                                                   absl::Span<const uint64_t> base_versions,
                                                   const GradientStreamOptions& options) {
  return std::make_unique<ShardStreams>(shards, map, base_versions, options);
}

}  // namespace spotps
