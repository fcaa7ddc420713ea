#pragma once
// Training utilities: gradient clipping, as torch.nn.utils. The learning-rate schedulers
// (torch.optim.lr_scheduler) are in nn/lr_scheduler.h, included here for the code that found them here.
#include <vector>

#include "autograd/tensor.h"
#include "nn/lr_scheduler.h"
#include "nn/module.h"

namespace tg::nn {

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

}  // namespace tg::nn
