#pragma once
// Learning-rate schedulers with PyTorch 1.13's names, arguments, defaults and arithmetic
// (torch.optim.lr_scheduler), over any tg::nn optimizer and each of its parameter groups:
//
//   tg::nn::SGD opt(model.named_parameters(), tg::nn::SGDOptions(0.1).momentum(0.9));
//   tg::nn::CosineAnnealingLR sched(opt, /*T_max=*/100);
//   for (int epoch = 0; epoch < 100; ++epoch) { train_one_epoch(opt); sched.step(); }
//
// As torch's: construction is epoch 0 (it sets epoch 0's lr: unchanged for most, lr * factor for
// LinearLR and ConstantLR, base_lr * lambda(0) for LambdaLR); each step() advances one epoch with
// the chainable formula (from each group's current lr, so that changes made by other schedulers
// or by hand carry on), and SequentialLR restarts a scheduler at a milestone with its closed form.
// A scheduler sets the groups the optimizer had when it was built (a group added later is not
// scheduled, as torch zips over its base_lrs). The optimizer must outlive its schedulers.
//
// Where these differ from torch, and why:
// - base_lrs are the groups' lrs when the scheduler is built. Torch keeps them as each group's
//   "initial_lr", set by the first scheduler built on the optimizer and shared by later ones;
//   SequentialLR gives all its schedulers its first one's base_lrs, which is what that sharing
//   gives there. Outside a SequentialLR, build a scheduler that reads base_lrs (LambdaLR,
//   CosineAnnealingLR after T_max) before one that changes the lr at construction.
// - A learning rate must be >= 0 (the optimizers' rule): a step that would set a negative one
//   (OneCycleLR's linear last phase extrapolated to last_epoch == total_steps) throws
//   std::invalid_argument and changes nothing.
// - Factors that torch divides by are checked when built: LinearLR's start_factor and ConstantLR's
//   factor in (0, 1] (0 divides by zero), CosineAnnealingLR's T_max >= 1.
// - get_last_lr() is the first group's lr, get_last_lrs() every group's (torch's get_last_lr()).
// - state_dict() is named tensors, as Optimizer's: the schedule's counters and learning rates, not
//   its hyperparameters (they come from the code that builds it) nor a LambdaLR's function.
//   load_state_dict() also sets the groups' lrs to the saved ones, since the optimizer's state does
//   not hold them (torch's does). save_npz writes float64 as float32: in memory the round trip is
//   exact, through a .npz file the learning rates come back rounded to float32.
//
// The Transformer's schedule (linear warmup over w updates, then inverse square root; the
// trainer's --warmup-steps) is a LambdaLR over the update number s = epoch + 1 (double w):
//
//   tg::nn::LambdaLR sched(opt, [w](std::int64_t e) { double s = e + 1.0; return std::min(s / w, std::sqrt(w / s)); });
//
// and WarmupInverseSqrtLR(opt, w) is that LambdaLR, with a start step for resuming.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace tg::nn {

class Optimizer;
class SchedulerStateReader;  // nn/lr_scheduler.cpp: checks and stages a state being loaded

/// A value for every parameter group, or one per group (torch's "float or list" arguments):
/// min_lr = 0.01 or min_lr = {0.01, 0.001}.
class PerGroup {
 public:
  PerGroup(double value) : values_{value} {}  // NOLINT: implicit, as torch accepts a bare float
  PerGroup(std::initializer_list<double> values) : values_(values), list_(true) {}
  PerGroup(std::vector<double> values) : values_(std::move(values)), list_(true) {}  // NOLINT
  /// One value per group: the value repeated, or the list if it has `groups` values
  /// (std::invalid_argument "<who>: expected <groups> values for <what>, got <n>" otherwise).
  std::vector<double> expand(std::size_t groups, const std::string& who, const std::string& what) const;

 private:
  std::vector<double> values_;
  bool list_ = false;
};

/// Base of the epoch schedulers (torch's _LRScheduler): step() advances last_epoch() and sets every
/// scheduled group's lr from get_lr(). A subclass implements get_lr() (and closed_form_lr() if it
/// has one) and calls initial_step() at the end of its constructor.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances one epoch and sets the groups' learning rates. Throws std::invalid_argument (and
  /// changes nothing) if a rate would be negative or NaN.
  virtual void step();
  /// The epoch of the current learning rates: 0 after construction, +1 per step().
  std::int64_t last_epoch() const { return last_epoch_; }
  /// The first group's learning rate set by the last step() (or by construction).
  double get_last_lr() const { return last_lrs_.front(); }
  /// Every scheduled group's (torch's get_last_lr() list).
  const std::vector<double>& get_last_lrs() const { return last_lrs_; }
  /// The groups' learning rates the schedule starts from (torch's base_lrs).
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  Optimizer& optimizer() const { return optimizer_; }

  /// The state as named tensors: "lr_scheduler.last_epoch" (i64), "lr_scheduler.base_lrs" and
  /// "lr_scheduler.last_lrs" (f64, one per group), and what a scheduler adds (SequentialLR: its
  /// schedulers' under "lr_scheduler.schedulers.<i>.").
  NamedTensors state_dict() const;
  /// Restores a state written by state_dict() of the same scheduler built the same way, and sets
  /// the groups' learning rates to the saved ones. Names, shapes and completeness are checked first;
  /// one std::runtime_error prefixed by `source` lists every problem, and nothing changes then.
  void load_state_dict(const NamedTensors& entries, const std::string& source = "load_state_dict");

 protected:
  /// Takes the groups' current learning rates as base_lrs; last_epoch is -1 until initial_step().
  explicit LRScheduler(Optimizer& optimizer);
  /// The learning rates of epoch last_epoch() by the chainable formula (torch's get_lr), one per
  /// scheduled group; current_lr(g) is group g's rate now.
  virtual std::vector<double> get_lr() = 0;
  /// The closed form at last_epoch() (torch's _get_closed_form_lr), used when SequentialLR restarts
  /// this scheduler at epoch 0. Default: get_lr().
  virtual std::vector<double> closed_form_lr() { return get_lr(); }
  /// torch's _initial_step: the step from epoch -1 to 0. Subclass constructors call it last.
  void initial_step() { step(); }
  /// Group g's current learning rate.
  double current_lr(std::size_t g) const;
  std::size_t num_groups() const { return base_lrs_.size(); }
  /// Replaces base_lrs (OneCycleLR: max_lr / div_factor, as torch's initial_lr).
  void set_base_lrs(std::vector<double> lrs) { base_lrs_ = std::move(lrs); }
  /// Sets the groups' learning rates to `lrs` and records them as the last ones (each checked
  /// >= 0 first; nothing changes on an error).
  void apply(const std::vector<double>& lrs);
  /// Appends the state beyond last_epoch, base_lrs and last_lrs under `prefix`.
  virtual void save_extra(NamedTensors& out, const std::string& prefix) const;
  /// Reads what save_extra wrote; pushes the changes to make once every check has passed.
  virtual void load_extra(SchedulerStateReader& in, const std::string& prefix, std::vector<std::function<void()>>& commit);
  /// Called after a state was loaded and the groups' lrs set (OneCycleLR sets the momentum).
  virtual void after_load() {}

 private:
  friend class SequentialLR;
  void save(NamedTensors& out, const std::string& prefix) const;
  void load(SchedulerStateReader& in, const std::string& prefix, std::vector<std::function<void()>>& commit);
  /// torch's step(0): epoch 0 by the closed form (SequentialLR at a milestone).
  void restart();

  Optimizer& optimizer_;
  std::int64_t last_epoch_ = -1;
  std::vector<double> base_lrs_;
  std::vector<double> last_lrs_;
};

/// lr *= gamma every step_size epochs (torch.optim.lr_scheduler.StepLR).
class StepLR : public LRScheduler {
 public:
  /// step_size >= 1, gamma >= 0.
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

/// lr *= gamma at each milestone epoch (gamma^k at a milestone listed k times)
/// (torch.optim.lr_scheduler.MultiStepLR).
class MultiStepLR : public LRScheduler {
 public:
  /// gamma >= 0.
  MultiStepLR(Optimizer& optimizer, std::vector<std::int64_t> milestones, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;

 private:
  std::vector<std::int64_t> milestones_;  // sorted
  double gamma_;
};

/// The lr is base_lr * factor until epoch total_iters, then base_lr (torch.optim.lr_scheduler.ConstantLR).
class ConstantLR : public LRScheduler {
 public:
  /// factor in (0, 1].
  explicit ConstantLR(Optimizer& optimizer, double factor = 1.0 / 3, std::int64_t total_iters = 5);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;

 private:
  double factor_;
  std::int64_t total_iters_;
};

/// The lr's factor moves linearly from start_factor to end_factor over total_iters epochs, then
/// stays (torch.optim.lr_scheduler.LinearLR): epoch e has base_lr * (start + (end - start) *
/// min(e, total_iters) / total_iters), computed by torch's chainable recurrence. start_factor in
/// (0, 1], end_factor in [0, 1], total_iters >= 1. LinearLR(opt, 1.0, 0.0, n) decays linearly to 0.
class LinearLR : public LRScheduler {
 public:
  explicit LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
                    std::int64_t total_iters = 5);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;

 private:
  double start_, end_;
  std::int64_t total_;
};

/// lr *= gamma every epoch (torch.optim.lr_scheduler.ExponentialLR).
class ExponentialLR : public LRScheduler {
 public:
  /// gamma >= 0.
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;

 private:
  double gamma_;
};

/// A function of the epoch: lr = base_lr * lr_lambda(epoch) (torch.optim.lr_scheduler.LambdaLR).
class LambdaLR : public LRScheduler {
 public:
  using Lambda = std::function<double(std::int64_t)>;
  /// The same function for every group.
  LambdaLR(Optimizer& optimizer, Lambda lr_lambda);
  /// One function per group (std::invalid_argument if the count differs from the groups').
  LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas);

  /// From now on lr = (base_lr × scale) × lr_lambda(epoch), base_lr being the group's lr when this
  /// scheduler was built (tapegrad's own, for PlateauDecay); sets the groups' lrs of the current
  /// epoch at once. scale > 0 (std::invalid_argument); 1 is the plain LambdaLR. A state_dict()
  /// holds the scaled base_lrs.
  void set_scale(double scale);
  double scale() const { return scale_; }

 protected:
  std::vector<double> get_lr() override;

 private:
  std::vector<Lambda> lambdas_;
  std::vector<double> unscaled_base_lrs_;
  double scale_ = 1.0;
};

/// lr *= lr_lambda(epoch) every epoch after the first (torch.optim.lr_scheduler.MultiplicativeLR).
class MultiplicativeLR : public LRScheduler {
 public:
  using Lambda = std::function<double(std::int64_t)>;
  MultiplicativeLR(Optimizer& optimizer, Lambda lr_lambda);
  /// One function per group.
  MultiplicativeLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas);

 protected:
  std::vector<double> get_lr() override;

 private:
  std::vector<Lambda> lambdas_;
};

/// Cosine annealing from base_lr to eta_min over T_max epochs (torch.optim.lr_scheduler.
/// CosineAnnealingLR), by torch's chainable form: after T_max the rate rises again, a cosine of
/// period 2 T_max. T_max >= 1.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min = 0.0);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;

 private:
  std::int64_t t_max_;
  double eta_min_;
};

/// Runs schedulers one after another (torch.optim.lr_scheduler.SequentialLR): schedulers[i] from
/// epoch milestones[i - 1] on, restarted there at its epoch 0 (closed form). Construction sets the
/// groups' lrs back to base_lrs and takes the first scheduler's epoch 0, as torch's. All schedulers
/// must be of `optimizer`, milestones one fewer than schedulers; a SequentialLR inside another may
/// only come first (torch's cannot restart one at a milestone either).
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<std::int64_t> milestones);
  void step() override;
  const std::vector<std::shared_ptr<LRScheduler>>& schedulers() const { return schedulers_; }

 protected:
  std::vector<double> get_lr() override;  // not used: step() delegates
  void save_extra(NamedTensors& out, const std::string& prefix) const override;
  void load_extra(SchedulerStateReader& in, const std::string& prefix, std::vector<std::function<void()>>& commit) override;
  void after_load() override;

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<std::int64_t> milestones_;
};

/// The 1cycle policy (torch.optim.lr_scheduler.OneCycleLR): per batch, from max_lr / div_factor up
/// to max_lr over pct_start of total_steps, then down to max_lr / (div_factor * final_div_factor)
/// (three_phase: back to the start, then down), cosine or linear; with cycle_momentum, the
/// momentum (SGD) or beta1 (Adam) moves inversely between max_momentum and base_momentum. The
/// steps are total_steps, or epochs * steps_per_epoch. Stepping past last_epoch == total_steps
/// throws std::invalid_argument, as torch.
class OneCycleLR : public LRScheduler {
 public:
  enum class AnnealStrategy { cos, linear };
  OneCycleLR(Optimizer& optimizer, PerGroup max_lr, std::optional<std::int64_t> total_steps = std::nullopt,
             std::optional<std::int64_t> epochs = std::nullopt, std::optional<std::int64_t> steps_per_epoch = std::nullopt,
             double pct_start = 0.3, AnnealStrategy anneal_strategy = AnnealStrategy::cos, bool cycle_momentum = true,
             PerGroup base_momentum = 0.85, PerGroup max_momentum = 0.95, double div_factor = 25.0,
             double final_div_factor = 1e4, bool three_phase = false);
  std::int64_t total_steps() const { return total_steps_; }

 protected:
  std::vector<double> get_lr() override;
  void after_load() override;

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr;              // 0: initial_lr, 1: max_lr, 2: min_lr
    int start_momentum, end_momentum;  // 0: max_momentum, 1: base_momentum
  };
  std::vector<double> lrs_and_momenta(std::int64_t step, bool set_momentum);
  void set_momentum(std::size_t group, double momentum);

  std::int64_t total_steps_;
  AnnealStrategy anneal_;
  bool cycle_momentum_;
  std::vector<Phase> phases_;
  std::vector<double> initial_lr_, max_lr_, min_lr_, max_momentum_, base_momentum_;
};

/// Linear warmup, then decay with the inverse square root of the update number s (1-based; the
/// Transformer's schedule, Vaswani et al. 2017, eq. 3): lr(s) = base_lr * min(s / warmup_steps,
/// sqrt(warmup_steps / s)), which peaks at base_lr at s = warmup_steps. The paper's d_model^-0.5
/// min(s^-0.5, s warmup^-1.5) is base_lr = (d_model * warmup_steps)^-0.5. A LambdaLR whose epoch e
/// sets the lr of update start_step + e + 1: construction sets the next update's (unlike StepLR,
/// lr(0) = 0 would waste an update), each step() after an optimizer step the one after.
/// start_step = the updates already done, to continue a schedule (e.g. the optimizer's
/// step_count() after loading it).
class WarmupInverseSqrtLR : public LambdaLR {
 public:
  /// warmup_steps >= 1, start_step >= 0.
  WarmupInverseSqrtLR(Optimizer& optimizer, std::int64_t warmup_steps, std::int64_t start_step = 0);
  /// The learning rate of update `step` (1-based) for group `group`.
  double lr_at(std::int64_t step, std::size_t group = 0) const;

 private:
  std::int64_t warmup_;
};

/// Linear annealing to 0 for a fixed budget of updates: after `from` updates, update s + 1 (s done)
/// has base_lr × clamp((to - s) / (to - from), 0, 1), reaching 0 at update `to`; before, base_lr
/// (torch's LinearLR(opt, 1, 0, to - from) begun after `from` updates, as a function of s, so a
/// resumed schedule repeats it). A LambdaLR whose epoch e sets the lr of update start_step + e + 1,
/// as WarmupInverseSqrtLR: construction sets the next update's, each step() after an optimizer step
/// the one after. 0 <= from < to, start_step >= 0 (std::invalid_argument).
class LinearAnnealLR : public LambdaLR {
 public:
  LinearAnnealLR(Optimizer& optimizer, std::int64_t from, std::int64_t to, std::int64_t start_step = 0);
};

/// What a PlateauDecay has decided so far.
struct PlateauDecayState {
  double scale = 1.0;                ///< the factor accumulated so far, in (0, 1]
  std::int64_t bad_validations = 0;  ///< validations since the last improvement or decay
};

/// Learning-rate decay on a plateau, driven by the caller's own judgement of each validation (for
/// instance EarlyStopping::step's "new best"), over a LambdaLR schedule (a constant one is
/// LambdaLR(opt, [](std::int64_t) { return 1.0; })): after `patience` validations without
/// improvement, counted since the last improvement or decay, scale = max(scale × factor, the
/// smallest normal double) and the schedule runs at (base_lr × scale) × lambda (LambdaLR::set_scale).
/// The accumulated factor is kept, not the decayed lr, so the lr of a resumed run is the same
/// product bit for bit, and never rounds to 0. factor in (0, 1]: 1 never decays (the count then
/// runs on until an improvement). Unlike ReduceLROnPlateau it judges no metric itself.
class PlateauDecay {
 public:
  using State = PlateauDecayState;
  /// Applies state.scale to `schedule` (which must outlive this). Throws std::invalid_argument for
  /// a factor outside (0, 1], patience < 1, or a scale outside (0, 1].
  PlateauDecay(LambdaLR& schedule, double factor, std::int64_t patience, State state = State());
  /// One validation; returns whether the lr was decayed.
  bool step(bool improved);
  const State& state() const { return state_; }

  /// "plateau_decay.scale" (f64) and "plateau_decay.bad_validations" (i64) scalars.
  NamedTensors state_dict() const;
  /// Restores what state_dict() wrote (checked first: names, scalars, scale in (0, 1], count >= 0;
  /// std::runtime_error prefixed by `source`) and applies the scale to the schedule.
  void load_state_dict(const NamedTensors& entries, const std::string& source = "load_state_dict");

 private:
  LambdaLR& schedule_;
  double factor_;
  std::int64_t patience_;
  State state_;
};

/// Reduces the lr when a metric stops improving (torch.optim.lr_scheduler.ReduceLROnPlateau): after
/// more than `patience` epochs without improvement, lr = max(lr * factor, min_lr) for each group
/// (unless that changes it by eps or less), then `cooldown` epochs during which bad epochs are not
/// counted. Improvement: in min mode a < best * (1 - threshold) (rel) or a < best - threshold (abs);
/// in max mode a > best * (1 + threshold) or a > best + threshold. Not an LRScheduler (torch's is
/// not a _LRScheduler either): its step takes the metric.
class ReduceLROnPlateau {
 public:
  enum class Mode { min, max };
  enum class ThresholdMode { rel, abs };
  /// factor < 1 (std::invalid_argument "ReduceLROnPlateau: factor should be < 1.0, got ...").
  explicit ReduceLROnPlateau(Optimizer& optimizer, Mode mode = Mode::min, double factor = 0.1, std::int64_t patience = 10,
                             double threshold = 1e-4, ThresholdMode threshold_mode = ThresholdMode::rel,
                             std::int64_t cooldown = 0, PerGroup min_lr = 0.0, double eps = 1e-8);
  ReduceLROnPlateau(const ReduceLROnPlateau&) = delete;
  ReduceLROnPlateau& operator=(const ReduceLROnPlateau&) = delete;

  /// One epoch with metric value `metrics` (a NaN is never an improvement).
  void step(double metrics);
  std::int64_t last_epoch() const { return last_epoch_; }
  double get_last_lr() const { return last_lrs_.front(); }
  const std::vector<double>& get_last_lrs() const { return last_lrs_; }
  /// The best metric so far (inf in min mode, -inf in max mode before the first step).
  double best() const { return best_; }
  std::int64_t num_bad_epochs() const { return num_bad_epochs_; }
  std::int64_t cooldown_counter() const { return cooldown_counter_; }
  bool in_cooldown() const { return cooldown_counter_ > 0; }
  /// Whether `a` improves on `best` (torch's is_better).
  bool is_better(double a, double best) const;

  /// "lr_scheduler.last_epoch", "lr_scheduler.num_bad_epochs", "lr_scheduler.cooldown_counter"
  /// (i64), "lr_scheduler.best" (f64) and "lr_scheduler.last_lrs" (f64, one per group).
  NamedTensors state_dict() const;
  /// As LRScheduler::load_state_dict: checked first, then the groups' lrs are set to the saved ones.
  void load_state_dict(const NamedTensors& entries, const std::string& source = "load_state_dict");

 private:
  Optimizer& optimizer_;
  Mode mode_;
  double factor_;
  std::int64_t patience_;
  double threshold_;
  ThresholdMode threshold_mode_;
  std::int64_t cooldown_;
  std::vector<double> min_lrs_;
  double eps_;
  std::int64_t last_epoch_ = 0;
  double best_;
  std::int64_t num_bad_epochs_ = 0;
  std::int64_t cooldown_counter_ = 0;
  std::vector<double> last_lrs_;
};

}  // namespace tg::nn
