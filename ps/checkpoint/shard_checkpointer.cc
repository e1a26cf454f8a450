#include "ps/checkpoint/shard_checkpointer.h"

#include <sys/stat.h>

#include <cstdio>

#include "absl/strings/str_format.h"
#include "common/log.h"

namespace spotps {

absl::StatusOr<std::unique_ptr<ShardCheckpointer>> ShardCheckpointer::Open(
    const std::string& directory, uint32_t shard_index, int keep_last) {
  absl::StatusOr<CheckpointDirectory> files =
      CheckpointDirectory::Open(directory, shard_index, keep_last);
  if (!files.ok()) return files.status();
  auto checkpointer = std::unique_ptr<ShardCheckpointer>(new ShardCheckpointer(*std::move(files)));
  absl::StatusOr<std::vector<uint64_t>> ids = checkpointer->files_.ListIds();
  if (ids.ok() && !ids->empty()) checkpointer->last_written_id_ = ids->back();
  return checkpointer;
}

absl::StatusOr<std::string> ShardCheckpointer::Restore(ShardStore* store) {
  absl::StatusOr<ShardCheckpoint> newest = files_.ReadNewest();
  if (!newest.ok()) return newest.status();
  for (const std::string& why : newest->skipped) {
    LogWarningF("skipped checkpoint %s", why);
  }
  if (absl::Status s = store->ImportState(std::move(newest->state)); !s.ok()) return s;
  restored_id_ = newest->id;
  return std::move(newest->extra_blob);
}

absl::StatusOr<CheckpointWriteResult> ShardCheckpointer::Write(uint64_t id, const ShardStore& store,
                                                               absl::string_view extra_blob) {
  absl::MutexLock lock(&write_mu_);
  const uint64_t newest = last_written_id_.load();
  if (id == 0) return absl::InvalidArgumentError("checkpoint ids start at 1");
  if (id < newest) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "checkpoint %d is older than this shard's newest, %d: checkpoint ids only grow", id,
        newest));
  }
  if (id - newest > kMaxIdStep) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "checkpoint %d is more than %d above this shard's newest, %d: refused, so that ids "
        "never approach their wrap-around",
        id, kMaxIdStep, newest));
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<ShardState> state = store.ExportState();
  if (!state.ok()) return state.status();
  if (absl::Status s = files_.Write(id, *state, extra_blob); !s.ok()) {
    absl::MutexLock failure_lock(&failure_mu_);
    last_failure_ = {absl::StrFormat("checkpoint %d: %s", id, s.ToString()), absl::Now()};
    return s;
  }
  {
    absl::MutexLock failure_lock(&failure_mu_);
    last_failure_ = Failure();
    if (id >= last_written_versions_.id) {
      last_written_versions_.id = id;
      last_written_versions_.versions.clear();
      for (const PartitionSnapshot& p : state->partitions) {
        last_written_versions_.versions.emplace_back(p.id, p.version);
      }
    }
  }
  uint64_t seen = last_written_id_.load();
  while (id > seen && !last_written_id_.compare_exchange_weak(seen, id)) {
  }
  CheckpointWriteResult result;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  struct stat st;
  if (::stat(files_.PathOf(id).c_str(), &st) == 0) result.bytes = static_cast<uint64_t>(st.st_size);
  {
    absl::MutexLock success_lock(&failure_mu_);
    last_success_ = {id, absl::Now(), result.seconds, result.bytes};
  }
  return result;
}

absl::StatusOr<std::string> ShardCheckpointer::ExtraBlobOf(uint64_t id) const {
  return files_.ReadExtraBlob(id);
}

}  // namespace spotps
