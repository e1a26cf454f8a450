#include "trainer/elastic/training_worker.h"

#include <cmath>
#include <future>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/unreachable_wait.h"
#include "common/log.h"
#include "trainer/runtime/torch_status.h"

namespace spotps {
namespace {

double MillisSince(absl::Time start) { return absl::ToDoubleMilliseconds(absl::Now() - start); }

// The factor clip_grad_norm_ scales a gradient of squared norm `squares` by
// (its epsilon included): 1 when the norm is within `clip_norm`, or when
// clipping is off (clip_norm <= 0).
float ClipFactor(double squares, double clip_norm) {
  if (clip_norm <= 0) return 1.0f;
  const double factor = clip_norm / (std::sqrt(squares) + 1e-6);
  return factor < 1.0 ? static_cast<float>(factor) : 1.0f;
}

// "val_loss 1.2345" and, for classification, " val_accuracy 0.8125".
std::string EvaluationText(const Evaluation& e) {
  std::string text = absl::StrFormat("val_loss %.4f", e.loss);
  if (e.accuracy >= 0) absl::StrAppendFormat(&text, " val_accuracy %.4f", e.accuracy);
  return text;
}

// What a worker that finds the model on the shards starts from: weights
// nobody has trained yet, or a job under way (or restored from a
// checkpoint).
std::string ExistingModelLine(Cluster& cluster) {
  absl::StatusOr<std::vector<v1::StatsResponse>> stats = cluster.Stats();
  uint64_t step = 0;
  for (const v1::StatsResponse& shard : stats.ok() ? *stats : std::vector<v1::StatsResponse>()) {
    step = std::max<uint64_t>(step, shard.global_step());
  }
  if (stats.ok() && step == 0) {
    return "another client initialised the model, no update applied yet: training starts from "
           "its weights";
  }
  return absl::StrFormat("the shards hold the model at global step %d: training goes on from "
                         "their weights",
                         step);
}

// Where this trainer's weights come from after its Init. Two trainers that
// race may split the shards between them (trainers of one job start from the
// same values, so the model is the same): the log says so, not that neither
// of them initialised anything.
std::string DescribeInit(const InitOutcome& init) {
  if (init.everywhere()) return "initialised the shards with this trainer's weights";
  if (init.nowhere()) {
    return "another trainer initialised the model moments ago: training starts from its weights";
  }
  return absl::StrFormat(
      "initialised %d of %d shards with this trainer's weights; another trainer initialised the "
      "others moments ago",
      init.shards_applied, init.shards);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainingWorker>> TrainingWorker::Create(
    Cluster* cluster, std::unique_ptr<TrainableModel> model, const TrainingData* data,
    const TrainingOptions& options, WorkSource work) {
  if ((work.coordinator == nullptr) != (work.membership == nullptr)) {
    return absl::InvalidArgumentError("a work source needs both a coordinator and a membership");
  }
  if (absl::Status s = CheckModelFitsData(*model, *data, options.batch_size, options.seq_len);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<ParameterBinding> binding = ParameterBinding::Create(*model);
  if (!binding.ok()) return binding.status();
  auto make = [&] {
    return std::unique_ptr<TrainingWorker>(
        new TrainingWorker(cluster, std::move(model), *std::move(binding), data, options, work));
  };
  // A worker joining a running job finds the model on the shards: it has
  // nothing to offer, and skips flattening and sending 4 bytes a parameter.
  // A model without initial values (a joining built-in GPT) waits for
  // someone else's: its zeros must never become the job's weights.
  UnreachableWait shards(absl::StrCat("the shards at ", cluster->addresses()),
                         options.unavailable_timeout);
  if (!model->has_initial_values()) shards.WaitForModel();
  absl::Status layout = shards.Retry([cluster] { return cluster->FetchLayout(); });
  if (!layout.ok() && (!absl::IsFailedPrecondition(layout) || !model->has_initial_values())) {
    return layout;
  }
  if (layout.ok()) {
    if (absl::Status same = binding->CheckSameModel(cluster->layout()); !same.ok()) return same;
    LogInfo(ExistingModelLine(*cluster));
    return make();
  }
  // Every worker offers its initial weights; each shard keeps the first. A
  // shard that is restarting is waited for, as everywhere else.
  const std::vector<float> initial = binding->FlattenWeights();
  absl::StatusOr<InitOutcome> init =
      UnreachableWait(absl::StrCat("the shards at ", cluster->addresses(), " to initialise"),
                      options.unavailable_timeout)
          .Retry<InitOutcome>([&] { return cluster->Init(binding->layout(), initial); });
  if (absl::IsPermissionDenied(init.status())) {
    // A trainer-role token may not initialise (docs/operations.md, "TLS and
    // roles"): train on the model an admin has initialised, or will.
    LogInfo("this trainer's token may not initialise the model: waiting for an admin to");
    if (absl::Status s = cluster->WaitForLayout(options.unavailable_timeout); !s.ok()) return s;
    if (absl::Status same = binding->CheckSameModel(cluster->layout()); !same.ok()) return same;
    init = InitOutcome{};
  }
  if (!init.ok()) {
    if (!absl::IsFailedPrecondition(init.status())) return init.status();
    if (absl::Status fetched = cluster->FetchLayout(); !fetched.ok()) return init.status();
    if (absl::Status same = binding->CheckSameModel(cluster->layout()); !same.ok()) return same;
    return init.status();
  }
  LogInfo(DescribeInit(*init));
  return make();
}

TrainingWorker::TrainingWorker(Cluster* cluster, std::unique_ptr<TrainableModel> model,
                               ParameterBinding binding, const TrainingData* data,
                               const TrainingOptions& options, WorkSource work)
    : cluster_(cluster),
      work_(work),
      model_(std::move(model)),
      binding_(std::move(binding)),
      data_(data),
      options_(options),
      wire_dtype_(options.dtype == ComputeDType::kBF16 ? v1::DTYPE_BF16 : v1::DTYPE_FP32),
      push_dtype_(options.push_dtype == v1::DTYPE_UNSPECIFIED ? wire_dtype_ : options.push_dtype),
      sync_(work.membership != nullptr && work.membership->consistency() == v1::CONSISTENCY_SYNC),
      local_steps_(work.membership != nullptr ? work.membership->local_steps() : 0),
      gradient_(binding_.layout().total_elements(), 0.0f),
      backward_push_(std::make_unique<BackwardPush>(binding_, cluster->partition_map())) {
  if (push_dtype_ == v1::DTYPE_INT8 && options.int8_error_feedback) {
    int8_feedback_ = std::make_unique<Int8ErrorFeedback>(cluster->partition_map());
  }
}

absl::Status TrainingWorker::PullWithRecovery(const PullOptions& options) {
  const absl::Time start = absl::Now();
  absl::Status s = UnreachableWait(absl::StrCat("the shards at ", cluster_->addresses(), " to pull"),
                                   options_.unavailable_timeout)
                       .Retry([&] {
                         return cluster_->Pull(wire_dtype_, &buffers_[PullTarget()], options);
                       });
  if (!s.ok()) return s;
  pulled_ = PullTarget();
  pull_ms_ += MillisSince(start);
  if (pulls_ == 0) first_pull_s_ = MillisSince(start) / 1000;
  pulls_ += 1;
  return s;
}

bool TrainingWorker::PulledBefore(const std::vector<uint64_t>& versions) const {
  if (pulled_ < 0) return true;
  const std::vector<uint64_t>& have = buffers_[pulled_].versions;
  for (size_t p = 0; p < versions.size() && p < have.size(); ++p) {
    if (versions[p] != kNoVersion && (have[p] == kNoVersion || have[p] < versions[p])) return true;
  }
  return false;
}

void TrainingWorker::BindNewestWeights() {
  if (pulled_ < 0 || pulled_ == bound_) return;
  binding_.BindTo(absl::MakeSpan(buffers_[pulled_].values));
  bound_ = pulled_;
}

absl::StatusOr<PushResult> TrainingWorker::FinishStreamedPush(
    const std::function<void()>& after_sent) {
  std::unique_ptr<GradientStream> stream = std::move(stream_);
  absl::StatusOr<PushResult> r = stream->Finish(gradient_scale_, after_sent);
  if (!r.ok()) {
    LogInfo(absl::StrCat("the push streamed during backward failed (", r.status().message(),
                         "): pushing the whole gradient again under the same id"));
    // From here on gradient_ itself is what gets pushed.
    for (float& g : gradient_) g *= gradient_scale_;
    gradient_scale_ = 1.0f;
  }
  return r;
}

absl::StatusOr<bool> TrainingWorker::PushWithRecovery(const std::string& push_id,
                                                      const std::function<void()>& after_sent) {
  const absl::Time start = absl::Now();
  absl::StatusOr<PushResult> r = absl::UnknownError("not pushed yet");
  if (stream_ != nullptr) r = FinishStreamedPush(after_sent);
  if (!r.ok()) {
    r = UnreachableWait(absl::StrCat("the shards at ", cluster_->addresses(), " to push"),
                        options_.unavailable_timeout)
            .Retry<PushResult>(
                [&] { return cluster_->Push(gradient_, base_versions_, push_dtype_, push_id); });
  }
  if (r.ok() && r->deferred && !sync_) {
    return absl::FailedPreconditionError(
        "the shards run --consistency=sync and hold every gradient for a round that only "
        "the coordinator closes: run this trainer with --coordinator=auto (or host:port)");
  }
  if (r.ok()) {
    push_ms_ += MillisSince(start);
    if (pushes_++ == 0) {
      first_push_ = absl::Now();
      first_push_rpc_s_ = MillisSince(start) / 1000;
    }
    staleness_sum_ += static_cast<double>(r->max_staleness);
    fresh_ = r->compute_on_fresh_weights;
    push_versions_ = std::move(r->versions);
    return true;
  }
  // Too stale, or based on versions a restarted shard no longer has: the
  // gradient is useless; drop it and make the next pull a full one.
  // The caller forgets the pulled versions (see PushThen).
  if (absl::IsAborted(r.status()) || absl::IsOutOfRange(r.status())) {
    pushes_dropped_ += 1;
    return false;
  }
  return r.status();
}

absl::Status TrainingWorker::PushPending() { return PushThen(nullptr); }

absl::Status TrainingWorker::PushThen(const std::function<absl::Status()>& alongside_settle) {
  const std::string push_id = pending_push_id_;  // Kept across retries.
  // A "fresh" push that went out during backward: once it is sent, the
  // pull of the update it is in starts, and gets each partition as soon as
  // the shards have applied it (PullOptions::min_versions) instead of after
  // the whole update and a round trip.
  std::future<absl::Status> early_pull;
  std::function<void()> start_pull;
  if (alongside_settle != nullptr && fresh_ && stream_ != nullptr) {
    start_pull = [this, &early_pull] {
      PullOptions options;
      for (uint64_t v : base_versions_) options.min_versions.push_back(v + 1);
      early_pull = std::async(std::launch::async, [this, options = std::move(options)] {
        return PullWithRecovery(options);
      });
    };
  }
  absl::StatusOr<bool> applied = PushWithRecovery(push_id, start_pull);
  if (!applied.ok()) {
    if (early_pull.valid()) early_pull.get().IgnoreError();
    return applied.status();
  }
  if (!*applied) {
    // Dropped: the next pull is a full one. A pull that started when the
    // stream was sent writes a buffer's versions; it lands first, so that
    // no weights are left bound without versions.
    if (early_pull.valid()) early_pull.get().IgnoreError();
    for (WeightSnapshot& b : buffers_) b.versions.clear();
  }
  if (alongside_settle == nullptr) {
    SettleUnit(*applied, push_id);
    return absl::OkStatus();
  }
  // The unit's commit and `alongside_settle` (the pull) go to different
  // places (the coordinator, the shards) and need not wait for each other;
  // a "fresh" step also leases its next unit meanwhile, before the commit:
  // a trainer cut off between the two then still holds a unit, whose lease
  // runs out and is re-issued, rather than none.
  std::future<void> settled = std::async(std::launch::async, [this, applied, &push_id] {
    if (fresh_ && !leased_ahead_.has_value()) LeaseAhead();
    SettleUnit(*applied, push_id);
  });
  absl::Status alongside;
  if (early_pull.valid()) {
    alongside = early_pull.get();
    // Exact, as the push's own answer says: a partition that came back at
    // an update without this push (another worker's, applied first) is
    // pulled again.
    if (alongside.ok() && *applied && PulledBefore(push_versions_)) alongside = alongside_settle();
  } else {
    alongside = alongside_settle();
  }
  settled.get();
  return alongside;
}

void TrainingWorker::SettleUnit(bool applied, const std::string& push_id) {
  if (work_.coordinator == nullptr) return;
  // A coordinator hiccup must not stop training: an uncommitted unit is
  // re-issued when its lease runs out, and counted as trained twice.
  for (const Unit& u : pending_units_) {
    if (applied) {
      // Sync mode: the push id tells the round which held gradient is ours.
      absl::StatusOr<bool> duplicate =
          work_.coordinator->Commit(u.lessee, u.epoch, u.index, sync_ ? push_id : "");
      if (duplicate.ok()) units_committed_ += *duplicate ? 0 : 1;
    } else {
      work_.coordinator->Release(u.lessee, u.epoch, u.index).IgnoreError();
    }
  }
}

void TrainingWorker::TakeLocalStep(const Unit& unit) {
  std::vector<float>& weights = buffers_[bound_].values;
  if (round_units_.empty()) {
    round_start_ = weights;
    round_versions_ = buffers_[bound_].versions;
  }
  if (inner_ == nullptr) inner_ = std::make_unique<InnerAdamW>(weights.size(), options_.inner);
  inner_->Step(absl::MakeSpan(weights), gradient_);
  round_units_.push_back(unit);
}

absl::Status TrainingWorker::EndLocalRound() {
  SealLocalRound();
  return Communicate(true);
}

void TrainingWorker::SealLocalRound() {
  std::vector<float>& weights = buffers_[bound_].values;
  for (size_t i = 0; i < weights.size(); ++i) gradient_[i] = round_start_[i] - weights[i];
  std::copy(round_start_.begin(), round_start_.end(), weights.begin());
  gradient_scale_ = 1.0f;
  if (int8_feedback_ != nullptr) int8_feedback_->Compensate(absl::MakeSpan(gradient_));
  base_versions_ = round_versions_;
  pending_units_ = std::move(round_units_);
  round_units_.clear();
  pending_push_id_ = cluster_->NewPushId();
}

absl::Status TrainingWorker::Communicate(bool push) {
  // Sync mode pulls once the next round opens, not before.
  if (sync_) return push ? PushPending() : absl::OkStatus();
  if (!push) return PullWithRecovery();
  return PushThen([this] { return PullWithRecovery(); });
}

void TrainingWorker::LeaseAhead() {
  if (work_.coordinator == nullptr) return;
  const uint64_t me = work_.membership->worker_id();
  absl::StatusOr<v1::AcquireUnitResponse> r = work_.coordinator->Acquire(me);
  if (r.ok() && r->outcome() == v1::AcquireUnitResponse::OUTCOME_UNIT) {
    leased_ahead_ = UnitOf(r->unit(), me);
  }
}

void TrainingWorker::JoinShards() {
  if (absl::StatusOr<int> joined = cluster_->Join(); !joined.ok()) {
    LogWarning(absl::StrCat("[", options_.name, "] join: ", joined.status().message()));
  }
}

absl::StatusOr<std::optional<TrainingWorker::Unit>> TrainingWorker::NextUnit(
    int64_t step, bool& gradient_pending, const std::atomic<bool>& stop) {
  if (work_.coordinator == nullptr) {
    Unit own;
    own.index = own.data_unit = static_cast<uint64_t>(step);
    return own;
  }
  if (leased_ahead_.has_value()) {
    std::optional<Unit> unit;
    std::swap(unit, leased_ahead_);
    return unit;
  }
  absl::Time next_start_log = absl::InfinitePast();
  bool left_shards = false;
  while (!stop.load()) {
    const uint64_t me = work_.membership->worker_id();
    // Shard 0 restarting: wait for it (each answer starts a new wait).
    absl::StatusOr<v1::AcquireUnitResponse> r =
        UnreachableWait(absl::StrCat("the coordinator at ", work_.coordinator->address()),
                        options_.unavailable_timeout)
            .Until(&stop)
            .Retry<v1::AcquireUnitResponse>([&] { return work_.coordinator->Acquire(me); });
    if (!r.ok() && stop.load()) break;
    if (absl::IsNotFound(r.status())) {
      if (absl::Status s = work_.membership->Rejoin(); !s.ok()) return s;
      continue;
    }
    if (!r.ok()) return r.status();
    if (r->outcome() == v1::AcquireUnitResponse::OUTCOME_UNIT) {
      // Back to work: presence streams again; the shards count us from our
      // next push.
      if (left_shards) JoinShards();
      return UnitOf(r->unit(), me);
    }
    if (r->outcome() == v1::AcquireUnitResponse::OUTCOME_DONE) return std::optional<Unit>();
    if (r->workers_to_start() > 0) {
      // The coordinator waited for the start already; ask again at once.
      if (absl::Now() >= next_start_log) {
        LogInfoF(
            "[%s] waiting for %d more trainer(s) to register before the job starts "
            "(spotps-ps --min_workers)",
            options_.name, r->workers_to_start());
        next_start_log = absl::Now() + absl::Seconds(10);
      }
      continue;
    }
    // Every remaining unit is leased, maybe one to us: settle ours first, or
    // the epoch could wait on the gradient we are sitting on.
    if (gradient_pending) {
      if (absl::Status s = PushPending(); !s.ok()) return s;
      gradient_pending = false;
    }
    if (!round_units_.empty()) {
      if (absl::Status s = EndLocalRound(); !s.ok()) return s;
    }
    // Idle until a unit comes back (the job's last units out with others,
    // or with a trainer that died): stop counting at the shards, or each
    // update the trainers still at work push would wait out
    // --average_wait_ms for us.
    if (!sync_ && step > 0 && !left_shards) {
      if (absl::Status s = cluster_->Leave(); !s.ok()) {
        LogWarning(absl::StrCat("[", options_.name, "] leave while idle: ", s.message()));
      }
      left_shards = true;
    }
    // In sync mode the coordinator already waited for the next round.
    if (!sync_) absl::SleepFor(absl::Milliseconds(100));
  }
  return std::optional<Unit>();
}

std::string TrainingWorker::PushIdFor(const Unit& unit, int64_t row_begin, int64_t row_end) const {
  std::string id = UnitPushId(unit.push_key, row_begin, row_end);
  return id.empty() ? cluster_->NewPushId() : id;
}

absl::StatusOr<double> TrainingWorker::ComputeGradient(uint64_t data_unit, int64_t row_begin,
                                                       int64_t row_end,
                                                       const std::vector<uint64_t>* stream_versions,
                                                       const std::string& push_id) {
  absl::StatusOr<TrainingBatch> batch =
      data_->TrainBatch(options_.data_seed, data_unit, options_.batch_size, options_.seq_len);
  if (!batch.ok()) return batch.status();
  if (row_begin > 0 || row_end < options_.batch_size) *batch = batch->Rows(row_begin, row_end);
  if (stream_versions != nullptr) {
    // Open before the forward: a shard whose stream breaks (this process
    // killed) stops waiting for our push at once, not after our silence.
    pending_push_id_ = push_id;
    absl::StatusOr<std::unique_ptr<GradientStream>> stream =
        cluster_->StartPush(*stream_versions, wire_dtype_, pending_push_id_);
    if (!stream.ok()) return stream.status();
    stream_ = *std::move(stream);
    stream_->Announce();
  }
  absl::StatusOr<double> value =
      ForwardAndBackward(data_unit, *batch, stream_versions != nullptr ? stream_.get() : nullptr);
  if (!value.ok()) stream_.reset();  // Cancelled: the shards apply nothing of it.
  return value;
}

absl::StatusOr<double> TrainingWorker::ForwardAndBackward(uint64_t data_unit,
                                                          const TrainingBatch& batch,
                                                          GradientStream* stream) {
  // A handle copy shares the parameter; its grad is the parameter's.
  for (torch::Tensor p : binding_.parameters()) p.mutable_grad().reset();
  absl::StatusOr<torch::Tensor> loss = ComputeLoss(*model_, batch, options_.dtype);
  if (!loss.ok()) return loss.status();
  absl::StatusOr<double> value = CatchTorchErrors([&] { return loss->item<double>(); });
  if (!value.ok()) return value.status();
  // A diverged or broken model: its gradient would be refused (or poison
  // the weights), so nothing of it is pushed.
  if (!std::isfinite(*value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the loss of ", model_->name(), " is ", *value, " on unit ", data_unit,
        ": its gradient is not pushed (a broken model, or training diverged: lower --lr)"));
  }
  if (stream != nullptr) backward_push_->Begin(stream, absl::MakeSpan(gradient_));
  absl::Status backward = CatchTorchErrors([&] {
                            loss->backward();
                            return true;
                          }).status();
  if (stream != nullptr) streamed_squares_ = backward_push_->End();
  if (!backward.ok()) return backward;
  return value;
}

absl::Status TrainingWorker::SealGradient(uint64_t data_unit, int64_t rows,
                                          const std::string& push_id) {
  const bool streamed = stream_ != nullptr;
  if (!streamed) pending_push_id_ = push_id;
  const double squares =
      streamed ? streamed_squares_ : binding_.GatherGradients(absl::MakeSpan(gradient_));
  if (!std::isfinite(squares)) {
    stream_.reset();  // Cancelled: the shards apply nothing of it.
    return absl::InvalidArgumentError(absl::StrCat(
        "the gradient of ", model_->name(), " on unit ", data_unit,
        " is not finite: it is not pushed (training diverged: lower --lr)"));
  }
  // clip_grad_norm_'s factor and, for half a ramp unit, its share of the
  // unit, so that the two halves move the weights as the unit's one
  // gradient would (exactly so under SGD): a smaller, not a noisier, step.
  gradient_scale_ = ClipFactor(squares, options_.clip_norm) * static_cast<float>(rows) /
                    static_cast<float>(options_.batch_size);
  if (!streamed && gradient_scale_ != 1.0f) {
    for (float& g : gradient_) g *= gradient_scale_;
    gradient_scale_ = 1.0f;
  }
  // In local mode the round's change, not each step's gradient, is pushed.
  if (!streamed && local_steps_ == 0 && int8_feedback_ != nullptr) {
    int8_feedback_->Compensate(absl::MakeSpan(gradient_));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainingSummary> TrainingWorker::Run(
    const std::atomic<bool>& stop, const std::function<void(const std::string&)>& log) {
  const absl::Time start = absl::Now();
  if (!sync_) {
    // Known from the first step on where the shards answer; otherwise the
    // first push reply tells.
    absl::StatusOr<std::vector<v1::StatsResponse>> stats = cluster_->Stats();
    for (const v1::StatsResponse& shard : stats.ok() ? *stats : std::vector<v1::StatsResponse>()) {
      fresh_ = fresh_ || shard.compute_on_fresh_weights();
    }
    if (absl::Status s = PullWithRecovery(); !s.ok()) return s;
  }
  model_->SetTraining(true);
  ComputeFirstPriority priority(options_.transfer_nice);
  bool priority_warned = false;
  auto lower = [&priority_warned](const absl::Status& s) {
    if (!s.ok() && !priority_warned) LogWarning(absl::StrCat("thread priority: ", s.message()));
    priority_warned = priority_warned || !s.ok();
  };
  TrainingSummary summary;
  bool gradient_pending = false;  // gradient_ holds an unpushed gradient.
  // No ramp where pushes wait for the others' ("fresh"), or come once a
  // round: an early half push would only wait for them, and put the worker
  // a step out of their pace.
  const bool local = local_steps_ > 0;
  const int64_t ramp_rows =
      sync_ || fresh_ || local || options_.first_step_batch >= options_.batch_size
          ? 0
          : options_.first_step_batch;
  std::optional<Unit> ramp_rest;  // The first unit, whose rows [ramp_rows, B) are still due.
  double compute_ms = 0, window_loss = 0;
  int64_t window_steps = 0, window_tokens = 0;
  double reported_pull_ms = 0, reported_push_ms = 0;  // Already in a StepRecord.
  absl::Time window_start = absl::Now();
  auto out_of_budget = [&] {
    return stop.load() || (options_.max_steps > 0 && summary.steps >= options_.max_steps) ||
           (options_.max_time > absl::ZeroDuration() && absl::Now() - start >= options_.max_time);
  };
  while (!out_of_budget()) {
    absl::StatusOr<std::optional<Unit>> unit = std::optional<Unit>(ramp_rest);
    int64_t row_begin = ramp_rest ? ramp_rows : 0, row_end = options_.batch_size;
    if (ramp_rest) {
      ramp_rest.reset();
    } else {
      unit = NextUnit(summary.steps, gradient_pending, stop);
      if (!unit.ok()) return unit.status();
      if (!unit->has_value()) {
        summary.job_done = !stop.load();
        break;
      }
      if (summary.steps == 0 && ramp_rows > 0) {
        row_end = ramp_rows;
        ramp_rest = **unit;
      }
    }
    if (summary.steps == 0 && !sync_) {
      // Shards that have applied no update yet wait for this trainer's
      // first gradient too: the job's first update holds every trainer
      // that starts with it. Best effort: without it, that update may
      // come before this trainer's push, which then lands one update late.
      JoinShards();
    }
    if (sync_) {  // The weights of the round this unit belongs to.
      if (absl::Status s = PullWithRecovery(); !s.ok()) return s;
    }
    // Shards with "+fresh" ask for weights that hold our last push: it goes
    // out (and is applied) before this step, and the pull follows it.
    const bool overlap = options_.overlap && !sync_ && !fresh_ && !local;
    if (!overlap && gradient_pending) {
      if (absl::Status s = Communicate(true); !s.ok()) return s;
      gradient_pending = false;
    }
    BindNewestWeights();
    const std::vector<uint64_t> versions = buffers_[bound_].versions;
    std::future<absl::Status> comm;
    lower(priority.LowerOtherThreads());
    if (overlap) {
      comm = std::async(std::launch::async, [this, &priority, gradient_pending] {
        priority.LowerThisThread().IgnoreError();  // LowerOtherThreads reports errors.
        return Communicate(gradient_pending);
      });
    }
    const absl::Time compute_start = absl::Now();
    // Where the push follows the step, it goes out during backward.
    // Int8 blocks need a partition's whole gradient (and its error feedback).
    const bool stream =
        !overlap && !local && options_.push_during_backward && push_dtype_ != v1::DTYPE_INT8;
    const std::string push_id = PushIdFor(**unit, row_begin, row_end);
    absl::StatusOr<double> loss = ComputeGradient((*unit)->data_unit, row_begin, row_end,
                                                  stream ? &versions : nullptr, push_id);
    const double step_compute_ms = MillisSince(compute_start);
    if (summary.steps == 0) summary.first_compute_s = step_compute_ms / 1000;
    compute_ms += step_compute_ms;
    absl::Status comm_status = overlap ? comm.get() : absl::OkStatus();
    if (!loss.ok()) return loss.status();
    if (!comm_status.ok()) return comm_status;
    // Only now: in overlap, the push that just finished read gradient_.
    if (absl::Status s = SealGradient((*unit)->data_unit, row_end - row_begin, push_id); !s.ok()) {
      return s;
    }
    if (local) {
      TakeLocalStep(**unit);
      if (round_units_.size() >= local_steps_) {
        if (absl::Status s = EndLocalRound(); !s.ok()) return s;
      }
    } else {
      base_versions_ = versions;
      // A ramp step's unit is settled by the push of its second half.
      pending_units_.clear();
      if (!ramp_rest.has_value()) pending_units_.push_back(**unit);
      gradient_pending = true;
    }
    if (gradient_pending && !overlap) {
      if (absl::Status s = Communicate(true); !s.ok()) return s;
      gradient_pending = false;
    }
    summary.steps += 1;
    summary.tokens += (row_end - row_begin) * options_.seq_len;
    window_tokens += (row_end - row_begin) * options_.seq_len;
    summary.last_train_loss = *loss;
    if (options_.on_step) {
      StepRecord record;
      record.steps = summary.steps;
      record.tokens = summary.tokens;
      record.loss = *loss;
      record.compute_s = step_compute_ms / 1000;
      record.pull_s = (pull_ms_ - reported_pull_ms) / 1000;
      record.push_s = (push_ms_ - reported_push_ms) / 1000;
      record.pushes_dropped = pushes_dropped_;
      reported_pull_ms = pull_ms_;
      reported_push_ms = push_ms_;
      options_.on_step(record);
    }
    window_loss += *loss;
    window_steps += 1;
    if (options_.log_every > 0 && summary.steps % options_.log_every == 0) {
      const double secs = absl::ToDoubleSeconds(absl::Now() - window_start);
      log(absl::StrFormat(
          "[%s] step %d loss %.4f tokens/s %.0f staleness %.2f pull %.1fms push %.1fms "
          "compute %.1fms",
          options_.name, summary.steps, window_loss / window_steps, window_tokens / secs,
          pushes_ ? staleness_sum_ / pushes_ : 0.0, pulls_ ? pull_ms_ / pulls_ : 0.0,
          pushes_ ? push_ms_ / pushes_ : 0.0, compute_ms / summary.steps));
      window_loss = 0;
      window_steps = 0;
      window_tokens = 0;
      window_start = absl::Now();
    }
    if (options_.eval_every > 0 && summary.steps % options_.eval_every == 0) {
      absl::StatusOr<Evaluation> val = Evaluate(*model_, *data_, options_.batch_size,
                                                options_.seq_len, options_.eval_batches,
                                                options_.dtype);
      if (!val.ok()) return val.status();
      log(absl::StrCat("[", options_.name, "] step ", summary.steps, " ", EvaluationText(*val)));
      if (options_.on_eval) options_.on_eval(summary.steps, *val);
    }
  }
  // Nothing computed is lost: the last gradient (or the round so far) goes
  // out before we leave, and commits exactly the units it trained.
  if (!round_units_.empty()) {
    SealLocalRound();
    gradient_pending = true;
  }
  if (gradient_pending) {
    if (absl::Status s = PushPending(); !s.ok()) return s;
  }
  // Stopped between the two halves of a ramp, or with a unit leased ahead:
  // the unit goes back whole.
  for (const std::optional<Unit>& unused : {ramp_rest, leased_ahead_}) {
    if (!unused.has_value() || work_.coordinator == nullptr) continue;
    work_.coordinator->Release(unused->lessee, unused->epoch, unused->index).IgnoreError();
  }
  summary.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  summary.tokens_per_s = summary.tokens / std::max(summary.seconds, 1e-9);
  summary.mean_staleness = pushes_ ? staleness_sum_ / pushes_ : 0.0;
  summary.mean_pull_ms = pulls_ ? pull_ms_ / pulls_ : 0.0;
  summary.mean_push_ms = pushes_ ? push_ms_ / pushes_ : 0.0;
  summary.mean_compute_ms = summary.steps ? compute_ms / summary.steps : 0.0;
  summary.pushes_dropped = pushes_dropped_;
  summary.units_committed = units_committed_;
  summary.first_push_s =
      pushes_ > 0 ? absl::ToDoubleSeconds(first_push_ - options_.process_start) : -1.0;
  summary.first_pull_s = first_pull_s_;
  summary.first_push_rpc_s = first_push_rpc_s_;
  summary.val_loss = std::nan("");
  if (options_.eval_batches > 0) {
    if (absl::Status s = PullWithRecovery(); !s.ok()) return s;
    BindNewestWeights();
    absl::StatusOr<Evaluation> val = Evaluate(*model_, *data_, options_.batch_size,
                                              options_.seq_len, options_.eval_batches,
                                              options_.dtype);
    if (!val.ok()) return val.status();
    summary.val_loss = val->loss;
    summary.val_accuracy = val->accuracy;
  }
  return summary;
}

}  // namespace spotps
