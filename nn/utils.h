#pragma once
// Training utilities: gradient clipping and learning-rate schedules, as torch.nn.utils and
// torch.optim.lr_scheduler.
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
/// and leaves the learning rate unchanged (but for WarmupInverseSqrtLR, which sets step 0's); each step() advances one epoch and sets the
/// optimizer's learning rate from its current value (PyTorch's chainable form). The optimizer
/// must outlive the scheduler. Schedule state is not part of the optimizer checkpoint.
class LRScheduler {
 public:
  /// Takes the optimizer's current learning rate as the initial one.
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  /// Advances one epoch and updates the optimizer's learning rate.
  void step();
  /// Number of step() calls since construction.
  std::int64_t last_epoch() const { return last_epoch_; }
  /// The learning rate set by the last step() (or the initial one).
  double get_last_lr() const { return last_lr_; }

 protected:
  /// The learning rate for epoch `epoch` (>= 1) given the current one.
  virtual double next_lr(double current, std::int64_t epoch) const = 0;
  /// Sets the optimizer's learning rate now (a schedule that starts elsewhere than at its lr).
  void set_initial_lr(double lr);

 private:
  Optimizer& optimizer_;
  std::int64_t last_epoch_ = 0;
  double last_lr_;
};

/// lr *= gamma every `step_size` epochs (torch.optim.lr_scheduler.StepLR).
class StepLR : public LRScheduler {
 public:
  /// step_size >= 1, gamma >= 0.
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);

 protected:
  double next_lr(double current, std::int64_t epoch) const override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

/// Linear warmup, then decay with the inverse square root of the update number s (1-based; the
/// Transformer's schedule, Vaswani et al. 2017, eq. 3):
///   lr(s) = base_lr * min(s / warmup_steps, sqrt(warmup_steps / s)),
/// rising to base_lr at s = warmup_steps. The paper's d_model^-0.5 min(s^-0.5, s warmup^-1.5) is
/// base_lr = (d_model * warmup_steps)^-0.5. base_lr is the optimizer's lr at construction, which
/// sets the lr of update start_step + 1 (unlike StepLR: starting at lr(0) = 0 would waste an
/// update); each step() after an optimizer step sets the next one's. start_step = the updates
/// already done, to continue a schedule (e.g. the optimizer's step_count() after loading it).
class WarmupInverseSqrtLR : public LRScheduler {
 public:
  /// warmup_steps >= 1, start_step >= 0.
  WarmupInverseSqrtLR(Optimizer& optimizer, std::int64_t warmup_steps, std::int64_t start_step = 0);
  /// The learning rate of update `step` (1-based).
  double lr_at(std::int64_t step) const;

 protected:
  double next_lr(double current, std::int64_t epoch) const override;

 private:
  double base_lr_;
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
  double next_lr(double current, std::int64_t epoch) const override;

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
  double next_lr(double current, std::int64_t epoch) const override;

 private:
  double gamma_;
};

}  // namespace tg::nn
