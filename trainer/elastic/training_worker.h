// TrainingWorker: one stateless trainer's loop against the parameter server.
//
// Each step: take the latest pulled weights (version v), compute a BF16
// forward/backward on a batch, clip by global norm, and push the gradient
// tagged with v. Communication overlaps compute: while step k computes, a
// background task pushes step k-1's gradient and then pulls fresh weights
// for step k+1. A worker therefore trains on weights that miss its own last
// gradient (staleness >= 1), the usual price of hiding the network.
//
// Shards with --staleness_method=...+fresh answer a push once it is applied
// (averaged with the other workers' concurrent pushes) and ask for no
// overlap: the worker pushes, pulls, then computes, on weights that hold
// every earlier update (staleness 0 while the workers keep pace).
//
// When the coordinator runs sync mode there is nothing to overlap: each
// step takes a unit of the open round, pulls the weights of that round,
// computes, pushes (the shards hold the gradient) and commits the unit with
// the push's id; the next unit comes once every live worker has done so.
//
// In local mode (--consistency=local:H) a worker trains H units in a row
// with its own AdamW (InnerAdamW) on the weights it pulled, then pushes the
// change of its weights and commits the round's units once it is applied;
// a stop mid-round pushes and commits the units trained so far.
#ifndef SPOTPS_TRAINER_ELASTIC_TRAINING_WORKER_H_
#define SPOTPS_TRAINER_ELASTIC_TRAINING_WORKER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "trainer/data/training_data.h"
#include "trainer/elastic/backward_push.h"
#include "trainer/elastic/inner_adamw.h"
#include "trainer/elastic/int8_error_feedback.h"
#include "trainer/elastic/worker_membership.h"
#include "trainer/model/parameter_binding.h"
#include "trainer/model/trainable_model.h"
#include "trainer/runtime/compute_precision.h"
#include "trainer/runtime/thread_priority.h"

namespace spotps {

// One finished step, for metrics and reports (TrainingOptions::on_step).
struct StepRecord {
  int64_t steps = 0;   // Steps so far, this one included.
  int64_t tokens = 0;  // Tokens so far.
  double loss = 0;
  // Time this step spent computing, and the pull and push time that ended
  // during it (overlapped with compute unless --overlap=false).
  double compute_s = 0, pull_s = 0, push_s = 0;
  int64_t pushes_dropped = 0;  // So far.
};

struct TrainingOptions {
  ComputeDType dtype = ComputeDType::kBF16;
  int64_t batch_size = 8;
  int64_t seq_len = 128;
  int64_t max_steps = 0;                           // 0: no step limit.
  absl::Duration max_time = absl::ZeroDuration();  // Zero: no time limit.
  double clip_norm = 1.0;                          // <= 0: no clipping.
  uint64_t data_seed = 0;                          // Picks this worker's samples.
  int64_t log_every = 10;
  int64_t eval_every = 0;  // 0: only at the end.
  int64_t eval_batches = 8;
  bool overlap = true;  // Hide pull/push behind compute.
  // Where the push follows the step (the shards' "fresh", sync mode,
  // overlap off): send each partition's gradient as soon as backward has
  // produced it (BackwardPush), rather than all of it after backward.
  bool push_during_backward = true;
  // Wire type of pushes; DTYPE_UNSPECIFIED: dtype's (BF16 or FP32). With
  // DTYPE_INT8 each gradient goes out whole after backward, and the part
  // int8 could not carry is added to the next gradient (error feedback,
  // Int8ErrorFeedback); pulls stay in dtype's type.
  v1::DType push_dtype = v1::DTYPE_UNSPECIFIED;
  // false: no error feedback with int8 pushes; each push's rounding error
  // is dropped. For measuring what the feedback is worth.
  bool int8_error_feedback = true;
  // Join ramp: the worker's first unit is trained in two steps, its first
  // `first_step_batch` sequences and then the rest, so that a newly started
  // worker's first gradient reaches the shards after a short step. Each
  // half's gradient (clipped as usual) is scaled by its share of the unit,
  // so the two pushes add up to the unit's gradient; the unit is settled
  // with the second push. 0 or >= batch_size: off. Never in sync mode.
  int64_t first_step_batch = 0;
  // Nice value for every thread of this process but the compute threads
  // (the one calling Run and LibTorch's OpenMP team): the transfer task,
  // the cluster's pool and gRPC's threads yield to compute on a shared
  // host (ComputeFirstPriority). 0: leave them alone.
  int transfer_nice = 10;
  // How long the worker keeps retrying when the cluster is unreachable
  // (a shard restarting) before giving up.
  absl::Duration unavailable_timeout = absl::Seconds(120);
  std::string name = "trainer";
  // Local mode (the coordinator runs --consistency=local:H): the optimizer
  // of the worker's own steps between pushes.
  InnerAdamWOptions inner;
  // When the process started, for the join-to-first-push time.
  absl::Time process_start = absl::Now();
  // Called on the training thread after every step and every validation
  // (--eval_every); may be empty. Keep them quick.
  std::function<void(const StepRecord&)> on_step;
  std::function<void(int64_t steps, const Evaluation& eval)> on_eval;
};

struct TrainingSummary {
  int64_t steps = 0;
  int64_t tokens = 0;
  double seconds = 0;
  double tokens_per_s = 0;
  double last_train_loss = 0;
  double val_loss = 0;  // NaN when there is no validation split to use.
  double val_accuracy = -1;  // Classification's; -1 otherwise.
  double mean_staleness = 0;
  double mean_pull_ms = 0, mean_push_ms = 0, mean_compute_ms = 0;
  int64_t pushes_dropped = 0;  // Refused as too stale.
  int64_t units_committed = 0;
  bool job_done = false;     // The coordinator has no work left.
  double first_push_s = -1;  // From process start to the first applied push.
  // The first pull, the first step's compute and the first applied push's
  // RPC, in seconds (-1 when there was none): the join's last phases.
  double first_pull_s = -1, first_compute_s = -1, first_push_rpc_s = -1;
};

// Where a worker's batches come from: work units leased from the
// coordinator, or (both null) its own endless stream of steps.
struct WorkSource {
  CoordinatorClient* coordinator = nullptr;
  WorkerMembership* membership = nullptr;
};

// Owns the worker's model binding and buffers; borrows the cluster, model
// and dataset. Promises: every computed gradient is pushed (or counted as
// dropped when the PS refuses it as too stale) before Run returns, including
// when `stop` is raised mid-run.
class TrainingWorker {
 public:
  // Binds the model to the cluster: initialises the PS with this model's
  // weights if nobody has (first init wins), or checks that the cluster
  // holds the same model (INVALID_ARGUMENT, naming the first tensor that
  // differs, if not). For classification data, options.seq_len must be the
  // data's.
  static absl::StatusOr<std::unique_ptr<TrainingWorker>> Create(
      Cluster* cluster, std::unique_ptr<TrainableModel> model, const TrainingData* data,
      const TrainingOptions& options, WorkSource work = {});

  // Trains until max_steps, max_time or `stop`. Progress lines go to `log`.
  absl::StatusOr<TrainingSummary> Run(const std::atomic<bool>& stop,
                                      const std::function<void(const std::string&)>& log);

 private:
  // A leased work unit (or, without a coordinator, a step number).
  struct Unit {
    uint32_t epoch = 0;
    uint64_t index = 0;
    uint64_t data_unit = 0;
    // The worker id the unit was leased to: only it may commit the unit,
    // even if the membership registered again under a new id since.
    uint64_t lessee = 0;
    std::string push_key;  // WorkUnit.push_key: its pushes' ids (UnitPushId).
  };
  static Unit UnitOf(const v1::WorkUnit& unit, uint64_t lessee) {
    return Unit{unit.epoch(), unit.index(), unit.data_unit(), lessee, unit.push_key()};
  }

  TrainingWorker(Cluster* cluster, std::unique_ptr<TrainableModel> model,
                 ParameterBinding binding, const TrainingData* data,
                 const TrainingOptions& options, WorkSource work);

  // The id rows [row_begin, row_end) of `unit` are pushed under: the
  // unit's (UnitPushId) where the coordinator names it, else a fresh one.
  std::string PushIdFor(const Unit& unit, int64_t row_begin, int64_t row_end) const;
  // Forward/backward on rows [row_begin, row_end) of this unit's batch;
  // returns the loss. The gradient stays in the parameters' grads, or,
  // with `stream_versions` (the weights' versions), goes out during
  // backward as a push `push_id` left open in stream_ (BackwardPush), and
  // into gradient_; that push is announced to the shards before the
  // forward, so that they notice at once if this process dies.
  absl::StatusOr<double> ComputeGradient(uint64_t data_unit, int64_t row_begin, int64_t row_end,
                                         const std::vector<uint64_t>* stream_versions,
                                         const std::string& push_id);
  // ComputeGradient's forward and backward of `batch`, the gradient going
  // out into `stream` during backward unless it is null.
  absl::StatusOr<double> ForwardAndBackward(uint64_t data_unit, const TrainingBatch& batch,
                                            GradientStream* stream);
  // Makes the computed gradient (of `rows` of the unit's batch) the pending
  // one: gradient_ (gathered unless streamed), gradient_scale_ (clipping,
  // a ramp half's share) and pending_push_id_ = `push_id` unless streamed.
  // INVALID_ARGUMENT, and nothing to push, if the gradient is not finite.
  absl::Status SealGradient(uint64_t data_unit, int64_t rows, const std::string& push_id);
  // Closes stream_ with gradient_scale_; on an error, gradient_ is scaled
  // for the whole push that follows.
  absl::StatusOr<PushResult> FinishStreamedPush(const std::function<void()>& after_sent);
  // Pushes gradient_ (computed at base_versions_ for pending_units_) and
  // settles the unit, then pulls into the buffer the model does not read,
  // riding out a restarting shard up to unavailable_timeout.
  absl::Status Communicate(bool push);
  absl::Status PullWithRecovery(const PullOptions& options = {});
  // Returns false when the PS refused the gradient as too stale.
  // `after_sent`: see GradientStream::Finish (run only for a streamed push).
  absl::StatusOr<bool> PushWithRecovery(const std::string& push_id,
                                        const std::function<void()>& after_sent = {});
  // Whether the newest pull holds some partition at a version older than
  // `versions` (by partition; kNoVersion: any).
  bool PulledBefore(const std::vector<uint64_t>& versions) const;
  absl::Status PushPending();
  // Pushes gradient_, then settles the unit, alongside `alongside_settle`
  // if given; its status, or the push's error.
  absl::Status PushThen(const std::function<absl::Status()>& alongside_settle);
  // Commits the pending units to the coordinator once their push was
  // applied (or releases them when the push was dropped); coordinator errors
  // are left to the lease (the unit is re-issued).
  void SettleUnit(bool applied, const std::string& push_id);
  // Local mode: applies the sealed gradient of `unit` to the weights the
  // model reads with inner_, and adds the unit to the round (its first
  // step keeps the weights and versions the round starts from).
  void TakeLocalStep(const Unit& unit);
  // Local mode: makes the round's change of weights (start minus now) the
  // pending push, based on the round's start versions and settling its
  // units, and puts the weights the round started from back, so that the
  // buffer holds what its versions say.
  void SealLocalRound();
  // Local mode: SealLocalRound, then pushes (committing the round's units)
  // and pulls the weights that hold the update.
  absl::Status EndLocalRound();
  // "fresh": leases the next unit while the pull runs, so that the step
  // after it starts computing at once; errors leave it to NextUnit.
  void LeaseAhead();
  // Cluster::Join, best effort (a failure is logged): presence streams to
  // every shard, and before the shards' first update, counted there.
  void JoinShards();
  // The next unit to train, or nullopt when the job is done or `stop` rose.
  // While none is free it leaves the shards (Cluster::Leave), so that no
  // update waits for it, and joins them again when one comes.
  absl::StatusOr<std::optional<Unit>> NextUnit(int64_t step, bool& gradient_pending,
                                               const std::atomic<bool>& stop);

  Cluster* const cluster_;
  const WorkSource work_;
  std::unique_ptr<TrainableModel> model_;
  ParameterBinding binding_;
  const TrainingData* const data_;
  const TrainingOptions options_;
  const v1::DType wire_dtype_;  // Of pulls, and of pushes unless push_dtype_ says otherwise.
  const v1::DType push_dtype_;
  const bool sync_;  // The coordinator runs --consistency=sync.
  const uint32_t local_steps_;  // --consistency=local:H's H; 0 in other modes.
  bool fresh_ = false;  // The last push reply asked for compute on fresh weights.

  // The model's parameters are views of one of two weight buffers
  // (ParameterBinding::BindTo): a pull writes the other, so that it can run
  // while the model computes, and the next step computes on it without a
  // copy. Only the comm task writes a buffer; only the training thread
  // switches which one the model reads, between steps.
  WeightSnapshot buffers_[2];
  int bound_ = -1;   // The buffer the model reads; -1 before the first.
  int pulled_ = -1;  // The buffer the newest pull went to.
  int PullTarget() const { return bound_ == 0 ? 1 : 0; }
  // Makes the newest pulled weights the model's.
  void BindNewestWeights();
  // The last step's gradient: pushed as gradient_ * gradient_scale_ (the
  // clipping factor and a ramp half's share). The scale is 1 but while
  // stream_ holds a push streamed during backward, which sends it last.
  std::vector<float> gradient_;
  float gradient_scale_ = 1.0f;
  double streamed_squares_ = 0;          // BackwardPush::End of the last step.
  std::string pending_push_id_;          // gradient_'s, kept across retries.
  std::unique_ptr<GradientStream> stream_;
  std::unique_ptr<BackwardPush> backward_push_;
  std::vector<uint64_t> base_versions_;  // Versions gradient_ was computed at.
  std::vector<uint64_t> push_versions_;  // PushResult::versions of the last push.
  // The units gradient_'s push settles: its unit, none for a ramp's first
  // half, a round's in local mode.
  std::vector<Unit> pending_units_;
  std::optional<Unit> leased_ahead_;     // LeaseAhead's unit, not trained yet.
  // Local mode: the round under way, its units, the weights and versions
  // it started from, and the optimizer of its steps.
  std::vector<Unit> round_units_;
  std::vector<float> round_start_;
  std::vector<uint64_t> round_versions_;
  std::unique_ptr<InnerAdamW> inner_;
  // Int8 pushes: what earlier pushes could not carry; null otherwise.
  std::unique_ptr<Int8ErrorFeedback> int8_feedback_;
  int64_t units_committed_ = 0;
  absl::Time first_push_;
  double first_pull_s_ = -1, first_push_rpc_s_ = -1;
  double staleness_sum_ = 0;
  int64_t pushes_ = 0, pushes_dropped_ = 0;
  double pull_ms_ = 0, push_ms_ = 0;
  int64_t pulls_ = 0;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_ELASTIC_TRAINING_WORKER_H_
