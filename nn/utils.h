#pragma once
// Training utilities: gradient clipping and learning-rate schedules, as torch.nn.utils and
// torch.optim.lr_scheduler.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg::nn {

class Optimizer;

/// torch.nn.utils.clip_grad_norm_ (L2): the global norm of all gradients (parameters without a
/// gradient are ignored) is accumulated in double in parameter order, so it does not depend on
/// the thread count. If max_norm / (norm + 1e-6) < 1 every gradient is scaled by that factor in
/// place. Returns the norm before clipping. A NaN norm leaves the gradients as they are (PyTorch
/// 1.13 multiplies them by NaN; the caller sees the NaN it returns). Compact gradients
/// (autograd/compact_grad.h) stay compact: their norm comes from CompactGrad::squared_norm and the
/// factor is recorded in them.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
/// clip_grad_norm over the tensors of named parameters (e.g. module.named_parameters()).
double clip_grad_norm(const NamedTensors& params, double max_norm);
/// LibTorch's name (torch::nn::utils::clip_grad_norm_).
inline double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) { return clip_grad_norm(params, max_norm); }
inline double clip_grad_norm_(const NamedTensors& params, double max_norm) { return clip_grad_norm(params, max_norm); }

/// Base of learning-rate schedules (torch.optim.lr_scheduler). Construction counts as epoch 0
/// and leaves the learning rates unchanged (but for LinearLR and WarmupInverseSqrtLR, which set
/// epoch 0's); each step() advances one epoch and sets every parameter group's learning rate from
/// its current value (PyTorch's chainable form), the groups that the optimizer had at construction
/// (torch's schedulers zip over their base_lrs too: a group added later is not scheduled). The
/// optimizer must outlive the scheduler. Schedule state is not part of the optimizer checkpoint.
class LRScheduler {
 public:
  /// Takes the groups' current learning rates as the initial ones.
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  /// Advances one epoch and updates the groups' learning rates.
  void step();
  /// Number of step() calls since construction.
  std::int64_t last_epoch() const { return last_epoch_; }
  /// The first group's learning rate set by the last step() (or the initial one).
  double get_last_lr() const { return last_lrs_.front(); }
  /// Every scheduled group's (torch's get_last_lr() list).
  const std::vector<double>& get_last_lrs() const { return last_lrs_; }

 protected:
  /// The learning rate of group `group` for epoch `epoch` (>= 1) given its current one.
  virtual double next_lr(double current, std::int64_t epoch, std::size_t group) const = 0;
  /// Sets each scheduled group's learning rate now to f(group, its current lr) (a schedule that
  /// starts elsewhere than at its lr).
  template <class F> void set_initial_lrs(F&& f) {
    for (std::size_t g = 0; g < last_lrs_.size(); ++g) last_lrs_[g] = f(g, last_lrs_[g]);
    apply();
  }
  /// Number of groups scheduled.
  std::size_t num_groups() const { return last_lrs_.size(); }

 private:
  void apply();  // writes last_lrs_ into the groups (each checked >= 0; nothing written on an error)
  Optimizer& optimizer_;
  std::int64_t last_epoch_ = 0;
  std::vector<double> last_lrs_;
};

/// lr *= gamma every `step_size` epochs (torch.optim.lr_scheduler.StepLR).
class StepLR : public LRScheduler {
 public:
  /// step_size >= 1, gamma >= 0.
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);

 protected:
  double next_lr(double current, std::int64_t epoch, std::size_t group) const override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

/// Linear warmup, then decay with the inverse square root of the update number s (1-based; the
/// Transformer's schedule, Vaswani et al. 2017, eq. 3):
///   lr(s) = base_lr * min(s / warmup_steps, sqrt(warmup_steps / s)),
/// rising to base_lr at s = warmup_steps. The paper's d_model^-0.5 min(s^-0.5, s warmup^-1.5) is
/// base_lr = (d_model * warmup_steps)^-0.5. base_lr is a group's lr at construction (each group
/// has its own), which
/// sets the lr of update start_step + 1 (unlike StepLR: starting at lr(0) = 0 would waste an
/// update); each step() after an optimizer step sets the next one's. start_step = the updates
/// already done, to continue a schedule (e.g. the optimizer's step_count() after loading it).
class WarmupInverseSqrtLR : public LRScheduler {
 public:
  /// warmup_steps >= 1, start_step >= 0.
  WarmupInverseSqrtLR(Optimizer& optimizer, std::int64_t warmup_steps, std::int64_t start_step = 0);
  /// The learning rate of update `step` (1-based) for group `group`.
  double lr_at(std::int64_t step, std::size_t group = 0) const;

 protected:
  double next_lr(double current, std::int64_t epoch, std::size_t group) const override;

 private:
  std::vector<double> base_lrs_;
  std::int64_t warmup_, start_;
};

/// The lr's factor moves linearly from start_factor to end_factor over total_iters epochs, then
/// stays (torch.optim.lr_scheduler.LinearLR, same defaults): construction sets lr = base_lr *
/// start_factor, epoch e sets base_lr * (start + (end - start) * min(e, total_iters) / total_iters),
/// computed by PyTorch's chainable recurrence (so it follows outside changes to the lr as PyTorch
/// does). start_factor in (0, 1] (0 divides by zero in that recurrence; PyTorch 2 refuses it too),
/// end_factor in [0, 1], total_iters >= 1. LinearLR(opt, 1.0, 0.0, n) is a linear decay to 0.
class LinearLR : public LRScheduler {
 public:
  explicit LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
                    std::int64_t total_iters = 5);

 protected:
  double next_lr(double current, std::int64_t epoch, std::size_t group) const override;

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
  double next_lr(double current, std::int64_t epoch, std::size_t group) const override;

 private:
  double gamma_;
};

}  // namespace tg::nn
