#include "nn/batchnorm.h"

#include <sstream>
#include <stdexcept>

#include "autograd/ops_conv.h"

namespace tg::nn {

BatchNormBase::BatchNormBase(const BatchNormOptions& options) : options_(options) {
  const std::int64_t c = options_.num_features();
  if (c <= 0) throw std::invalid_argument("BatchNorm: num_features must be positive, got " + std::to_string(c));
  if (options_.affine()) {
    weight = register_parameter("weight", Tensor::ones({c}));
    bias = register_parameter("bias", Tensor::zeros({c}));
  }
  if (options_.track_running_stats()) {
    running_mean = register_buffer("running_mean", Tensor::zeros({c}));
    running_var = register_buffer("running_var", Tensor::ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", Tensor::zeros({}, DType::i64));
  }
}

Tensor BatchNormBase::forward(const Tensor& x) {
  check_input(x);
  const bool track = options_.track_running_stats();
  double factor = 0.0;
  if (is_training() && track) {
    std::int64_t& n = num_batches_tracked.data<std::int64_t>()[0];
    ++n;
    autograd::increment_version(num_batches_tracked);
    factor = options_.momentum() ? *options_.momentum() : 1.0 / static_cast<double>(n);
  }
  // As torch: batch statistics in training, or in eval when none are tracked.
  const bool use_batch = is_training() || !track;
  const bool pass_running = !is_training() || track;
  return tg::batch_norm(x, pass_running ? running_mean : Tensor(), pass_running ? running_var : Tensor(), weight, bias,
                        use_batch, factor, options_.eps());
}

std::string BatchNormBase::extra_repr() const {
  std::ostringstream os;
  os << options_.num_features() << ", eps=" << options_.eps() << ", momentum=";
  if (options_.momentum())
    os << *options_.momentum();
  else
    os << "None";
  os << ", affine=" << (options_.affine() ? "true" : "false")
     << ", track_running_stats=" << (options_.track_running_stats() ? "true" : "false");
  return os.str();
}

void BatchNorm1dImpl::check_input(const Tensor& x) const {
  if (x.dim() != 2 && x.dim() != 3)
    throw std::invalid_argument("BatchNorm1d: expected a 2-D or 3-D input, got " + x.shape().str());
}

void BatchNorm2dImpl::check_input(const Tensor& x) const {
  if (x.dim() != 4) throw std::invalid_argument("BatchNorm2d: expected a 4-D input, got " + x.shape().str());
}

GroupNormImpl::GroupNormImpl(std::int64_t num_groups, std::int64_t num_channels, double eps, bool affine)
    : num_groups_(num_groups), num_channels_(num_channels), eps_(eps), affine_(affine) {
  if (num_groups <= 0 || num_channels <= 0 || num_channels % num_groups != 0)
    throw std::invalid_argument("GroupNorm: num_channels=" + std::to_string(num_channels) +
                                " must be divisible by num_groups=" + std::to_string(num_groups) +
                                " (both positive)");
  if (affine) {
    weight = register_parameter("weight", Tensor::ones({num_channels}));
    bias = register_parameter("bias", Tensor::zeros({num_channels}));
  }
}

Tensor GroupNormImpl::forward(const Tensor& x) const {
  if (x.dim() < 2 || x.size(1) != num_channels_)
    throw std::invalid_argument("GroupNorm: expected an input (N, " + std::to_string(num_channels_) + ", *), got " +
                                x.shape().str());
  return tg::group_norm(x, num_groups_, weight, bias, eps_);
}

std::string GroupNormImpl::extra_repr() const {
  std::ostringstream os;
  os << num_groups_ << ", " << num_channels_ << ", eps=" << eps_ << ", affine=" << (affine_ ? "true" : "false");
  return os.str();
}

}  // namespace tg::nn
