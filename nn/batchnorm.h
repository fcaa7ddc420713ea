#pragma once
// BatchNorm1d, BatchNorm2d and GroupNorm as torch.nn's (PyTorch 1.13), through tg::batch_norm and
// tg::group_norm (autograd/ops_conv.h).
//
// BatchNorm's running_mean, running_var and num_batches_tracked are buffers, as torch's
// (Module::register_buffer): state_dict() lists them after weight and bias with torch's names and
// dtypes, save/load carry them and to() converts the floating ones, but they are not parameters.
#include <cstdint>
#include <optional>
#include <string>

#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg::nn {

/// Options of BatchNorm1d/2d: BatchNormOptions(32).eps(1e-3).momentum(0.01). momentum nullopt
/// means a cumulative average (torch's momentum=None: factor 1 / num_batches_tracked).
class BatchNormOptions {
 public:
  BatchNormOptions(std::int64_t num_features) : num_features_(num_features) {}  // NOLINT: BatchNorm2d(32)
  BatchNormOptions& eps(double v) { eps_ = v; return *this; }
  BatchNormOptions& momentum(std::optional<double> v) { momentum_ = v; return *this; }
  BatchNormOptions& affine(bool v) { affine_ = v; return *this; }
  BatchNormOptions& track_running_stats(bool v) { track_ = v; return *this; }
  std::int64_t num_features() const { return num_features_; }
  double eps() const { return eps_; }
  std::optional<double> momentum() const { return momentum_; }
  bool affine() const { return affine_; }
  bool track_running_stats() const { return track_; }

 private:
  std::int64_t num_features_;
  double eps_ = 1e-5;
  std::optional<double> momentum_ = 0.1;
  bool affine_ = true, track_ = true;
};

/// The shared part of torch's _BatchNorm. State, in torch's state_dict order: parameters "weight"
/// (ones), "bias" (zeros) when affine; buffers "running_mean" (zeros), "running_var" (ones),
/// "num_batches_tracked" (int64, 0-dim, 0) when track_running_stats. Training mode normalises with the batch's
/// statistics and updates the running ones; eval mode uses the running ones (the batch's when
/// they are not tracked).
class BatchNormBase : public Module {
 public:
  using options_type = BatchNormOptions;
  explicit BatchNormBase(const BatchNormOptions& options);
  /// Updates the running statistics in training mode, so it is not const.
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }
  const BatchNormOptions& options() const { return options_; }
  /// "32, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true" (PyTorch's repr, C++ booleans).
  std::string extra_repr() const override;

  Tensor weight, bias;                                   ///< (C); undefined without affine
  Tensor running_mean, running_var, num_batches_tracked;  ///< buffers; undefined without track_running_stats

 protected:
  /// Throws std::invalid_argument naming the layer unless x has a dimension count it accepts.
  virtual void check_input(const Tensor& x) const = 0;

 private:
  BatchNormOptions options_;
};

/// torch.nn.BatchNorm1d: input (N, C) or (N, C, L).
class BatchNorm1dImpl : public BatchNormBase {
 public:
  using BatchNormBase::BatchNormBase;

 protected:
  void check_input(const Tensor& x) const override;
};
TG_MODULE(BatchNorm1d);

/// torch.nn.BatchNorm2d: input (N, C, H, W).
class BatchNorm2dImpl : public BatchNormBase {
 public:
  using BatchNormBase::BatchNormBase;

 protected:
  void check_input(const Tensor& x) const override;
};
TG_MODULE(BatchNorm2d);

/// torch.nn.GroupNorm(num_groups, num_channels, eps=1e-5, affine=True): parameters "weight"
/// (ones) and "bias" (zeros) of shape (num_channels) when affine. Input (N, C, *).
class GroupNormImpl : public Module {
 public:
  GroupNormImpl(std::int64_t num_groups, std::int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }
  std::int64_t num_groups() const { return num_groups_; }
  std::int64_t num_channels() const { return num_channels_; }
  /// "2, 8, eps=1e-05, affine=true".
  std::string extra_repr() const override;

  Tensor weight, bias;  ///< (num_channels); undefined without affine

 private:
  std::int64_t num_groups_, num_channels_;
  double eps_;
  bool affine_;
};
TG_MODULE(GroupNorm);

}  // namespace tg::nn
