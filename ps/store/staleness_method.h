// StalenessMethod: how a shard in async mode treats a gradient computed on
// weights that other pushes have moved since (staleness = versions applied
// between the pull and the push).
#ifndef SPOTPS_PS_STORE_STALENESS_METHOD_H_
#define SPOTPS_PS_STORE_STALENESS_METHOD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ps/store/optimizer.h"

namespace spotps {

// The per-push rule. One of these, optionally joined with "avg" (shard-side
// averaging), "fresh" (averaging whose pushes answer once applied, so that
// trainers compute on weights that hold them) and "warmup" (a warmup as long
// as the live workers ask for): --staleness_method=dc+avg+warmup. Local mode
// also takes "delayed" (asynchronous local steps, delayed Nesterov).
enum class StalenessMethod {
  kNone,     // Apply every gradient as it is, with the full step size.
  kLrScale,  // Zhang et al. 2016: step size lr / (1 + staleness).
  // Zheng et al. 2017 (DC-ASGD, adaptive form) under AdamW: the gradient is
  // moved to the current weights with a diagonal curvature estimate,
  // g + lambda * g*g / sqrt(v_hat) * (w_now - w_base) / lr, where
  // w_now - w_base is estimated as staleness times the partition's last
  // AdamW update (read back from m and v, so no weight history is kept).
  // Dividing by lr makes lambda scale-free: at lambda = 1 a gradient
  // aligned with the last update changes by up to staleness times itself.
  kDelayCompensated,
  // Mitliagkas et al. 2016 ("Asynchrony begets momentum"): K asynchronous
  // workers add an implicit momentum of about 1 - 1/K. With the shard's
  // running mean staleness s (K ~ 1 + s for equal workers), AdamW's beta1
  // becomes max(0, beta1 - s / (1 + s)), so explicit plus implicit
  // momentum stays near beta1. Under SGD the same for its momentum (a
  // no-op without momentum).
  kMomentum,
};

struct StalenessConfig {
  StalenessMethod method = StalenessMethod::kNone;
  float dc_lambda = 1.0f;  // kDelayCompensated's lambda (finite, >= 0).
  // "avg": the shard sums concurrent pushes and applies their mean as one
  // update once it holds `average_pushes` of them (0: as many as there are
  // live workers) or the oldest has waited `average_wait_ms`. Each push is
  // acknowledged on arrival; a crash loses the held, unapplied ones.
  bool average = false;
  int average_pushes = 0;
  double average_wait_ms = 1000;
  // "fresh" (implies "avg"): a push is answered only once the averaged
  // update that holds it is applied (at most about average_wait_ms later),
  // and the reply asks the trainer to pull before its next step instead of
  // overlapping: gradients are computed on weights that hold every earlier
  // update, staleness 0 while the workers keep pace. Nothing acknowledged is
  // lost in a crash, since a push is acknowledged only once applied.
  bool fresh = false;
  // Local mode's pseudo-gradients (with "avg": LocalRounds): an update that
  // holds fewer pushes than the k it waited for applies their sum / k.
  bool share_of_k = false;
  // "delayed" (local mode, instead of averaging): each pseudo-gradient is
  // applied on arrival as its 1/k share with plain SGD, and the outer
  // Nesterov momentum steps once per k arrivals with their sum (Liu et al.
  // 2024, "Asynchronous Local-SGD Training for Language Modeling"): trainers
  // of different speeds never wait for each other, and momentum is not
  // compounded by every short update. Needs SGD with Nesterov momentum.
  bool delayed_nesterov = false;
  // "warmup": the step size ramps up linearly over warmup_steps_per_worker
  // times the live workers' count of updates (on top of the schedule).
  bool worker_warmup = false;
  int64_t warmup_steps_per_worker = 10;
};

// "none", "lr", "dc" or "momentum"; INVALID_ARGUMENT otherwise.
absl::StatusOr<StalenessMethod> ParseStalenessMethod(absl::string_view name);
// A whole --staleness_method value: one rule, "avg", "fresh", "warmup",
// joined by '+' ("avg" alone means none+avg; "fresh" means avg+fresh), or
// "delayed" alone. Sets
// method, average, fresh, worker_warmup and delayed_nesterov of *config; INVALID_ARGUMENT (and
// no change) for anything else.
absl::Status ParseStalenessSpec(absl::string_view spec, StalenessConfig* config);
std::string StalenessMethodName(StalenessMethod method);
// A one-word description for logs and start lines, e.g.
// "dc(lambda=1)+avg(k=live,wait=50ms)" or "none+avg(k=live,wait=1000ms)+fresh".
std::string DescribeStaleness(const StalenessConfig& config);
absl::Status ValidateStalenessConfig(const StalenessConfig& config, bool adamw);

// What the shard knows about the asynchrony when it applies an update.
struct AsyncView {
  uint64_t staleness = 0;     // This push's (or averaged update's) staleness.
  double mean_staleness = 0;  // The shard's running mean.
  int live_workers = 0;       // 0: unknown (estimated as 1 + mean_staleness).
  uint64_t updates_done = 0;  // The global step before this update.
};

// How one update is applied: the step size, the factor the optimizer
// multiplies its delay compensation by (0: none), AdamW's beta1 for this
// update (negative: the configured one), under delayed Nesterov whether
// the momentum steps with this update, and the share of a round it is.
struct StalenessStep {
  double lr = 0;
  float compensation = 0.0f;
  float beta1 = -1.0f;
  MomentumPhase momentum_phase = MomentumPhase::kEveryUpdate;
  float round_share = 1.0f;  // Optimizer::Apply's: local rounds' short updates.
};
StalenessStep PlanStalenessStep(const StalenessConfig& config, double lr, uint64_t staleness);
StalenessStep PlanStalenessStep(const StalenessConfig& config, double lr, float beta1,
                                const AsyncView& view);

// How long a local-mode update (rounds averaged, share_of_k) waits for the
// rest of its round: the configured average_wait_ms, or 1/kRoundWaitDivisor
// of the trainers' median round time where longer, that part at most
// kMaxRoundWait. A round of H steps takes minutes on a large model, and
// trainers whose rounds drift apart by more than a fixed wait would each be
// applied alone.
inline constexpr int kRoundWaitDivisor = 4;
inline constexpr absl::Duration kMaxRoundWait = absl::Seconds(10);
absl::Duration LocalRoundWait(const StalenessConfig& config, absl::Duration median_round);

// How long a held averaged update waits for its k pushes before it is
// applied with those it holds.
struct AveragingWaits {
  absl::Duration update;  // Any update: average_wait_ms, LocalRoundWait in local mode.
  // Local mode, an update a new worker's first push opened: `update` plus
  // up to a whole median round (that part at most kMaxRoundWait). A
  // replacement's first round ends at no particular moment in the others';
  // applied alone, it would leave its rounds and theirs out of phase, each
  // update then holding some of the pushes and waiting out `update` for
  // the rest, round after round. The others' rounds end within one round
  // of its push: waiting for them puts it in phase for good.
  absl::Duration new_workers_round;
};
// The waits for `config`, whose trainers' median round (local mode) is
// `median_round` (zero: not known yet, and a new worker waits as any).
AveragingWaits AveragingWaitsFor(const StalenessConfig& config, absl::Duration median_round);

// The live workers as `view` knows them: its count, or 1 + the running mean
// staleness rounded, at least 1.
int EstimatedWorkers(const AsyncView& view);
// kMomentum's beta1 (or SGD momentum): max(0, beta1 - s / (1 + s)) for mean
// staleness s.
float AsyncBeta1(float beta1, double mean_staleness);

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_STALENESS_METHOD_H_
