#pragma once
// Convolution, pooling and batch/group normalisation over NCHW (and NCL) tensors, as
// torch.nn.functional of PyTorch 1.13: same names, argument order, defaults and output sizes.
// conv1d/conv2d run im2col (or the input itself for a 1x1 kernel) onto kernels::gemm, parallel
// over the batch; their backward is written beside the forward (col2im for the input gradient).
// Every op here is twice differentiable: conv2d, conv2d_input and conv2d_weight are each other's
// derivatives, the pools' backwards are recorded ops too. Implemented in autograd/ops_conv.cpp.
#include <cstdint>
#include <optional>
#include <tuple>

#include "autograd/tensor.h"

namespace tg {

/// An int or a pair of ints (height, width), as torch's `int or tuple` arguments: 2 means (2, 2).
struct IntPair {
  std::int64_t h = 0, w = 0;
  IntPair(std::int64_t v) : h(v), w(v) {}  // NOLINT: implicit, as torch accepts a bare int
  IntPair(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
};

/// torch's string padding of conv1d/conv2d: "valid" (none) or "same" (output size = input size;
/// stride 1 only; an odd total padding puts the extra element after, as PyTorch).
enum class PaddingMode { valid, same };

/// Padding of conv1d/conv2d: a number, a (height, width) pair or a PaddingMode.
struct ConvPadding {
  IntPair value = 0;
  std::optional<PaddingMode> mode;
  ConvPadding(std::int64_t v) : value(v) {}  // NOLINT: implicit, as the torch arguments
  ConvPadding(std::int64_t h, std::int64_t w) : value(h, w) {}
  ConvPadding(IntPair v) : value(v) {}  // NOLINT
  ConvPadding(PaddingMode m) : mode(m) {}  // NOLINT
};

/// torch.nn.functional.conv2d: input (N, C, H, W) or unbatched (C, H, W), weight
/// (O, C / groups, kH, kW), bias (O) or undefined -> (N, O, H_out, W_out) with
/// H_out = (H + 2 pad - dilation (kH - 1) - 1) / stride + 1 (floor). Throws
/// std::invalid_argument naming the op and the shapes (wrong channels, groups not dividing the
/// channels, a kernel larger than the padded input, a dtype mismatch).
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), IntPair stride = 1,
              ConvPadding padding = 0, IntPair dilation = 1, std::int64_t groups = 1);

/// torch.nn.functional.conv1d: input (N, C, L) or (C, L), weight (O, C / groups, K); the same
/// computation as conv2d with a height of 1. A padding pair is refused (one number or a mode).
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), std::int64_t stride = 1,
              ConvPadding padding = 0, std::int64_t dilation = 1, std::int64_t groups = 1);

/// torch.nn.grad.conv2d_input: the gradient of conv2d with respect to an input of shape
/// `input_size` (N, C, H, W), given the weight and the gradient of the output (a transposed
/// convolution). Differentiable in weight and grad_output.
Tensor conv2d_input(const Shape& input_size, const Tensor& weight, const Tensor& grad_output, IntPair stride = 1,
                    IntPair padding = 0, IntPair dilation = 1, std::int64_t groups = 1);

/// torch.nn.grad.conv2d_weight: the gradient of conv2d with respect to a weight of shape
/// `weight_size`, given the input and the gradient of the output. Differentiable in both.
Tensor conv2d_weight(const Tensor& input, const Shape& weight_size, const Tensor& grad_output, IntPair stride = 1,
                     IntPair padding = 0, IntPair dilation = 1, std::int64_t groups = 1);

/// torch.nn.functional.max_pool2d over (N, C, H, W) or (C, H, W); stride unset means
/// kernel_size; padding (implicit -inf) at most half the kernel; ceil_mode as PyTorch (a window
/// must start inside the input or the left padding). The gradient goes to the first maximum of
/// each window (a NaN counts as the maximum, as PyTorch).
Tensor max_pool2d(const Tensor& input, IntPair kernel_size, std::optional<IntPair> stride = std::nullopt,
                  IntPair padding = 0, IntPair dilation = 1, bool ceil_mode = false);
/// max_pool2d with return_indices=True: (values, indices), indices (int64) flat in each input
/// plane (h * W + w), as PyTorch.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntPair kernel_size,
                                                   std::optional<IntPair> stride = std::nullopt, IntPair padding = 0,
                                                   IntPair dilation = 1, bool ceil_mode = false);
/// torch.nn.functional.max_pool1d over (N, C, L) or (C, L).
Tensor max_pool1d(const Tensor& input, std::int64_t kernel_size, std::optional<std::int64_t> stride = std::nullopt,
                  std::int64_t padding = 0, std::int64_t dilation = 1, bool ceil_mode = false);

/// torch.nn.functional.avg_pool2d: the mean of each window; count_include_pad divides by the
/// window including zero padding (not the part beyond the input that ceil_mode adds), otherwise
/// by the elements inside the input; divisor_override replaces the divisor.
Tensor avg_pool2d(const Tensor& input, IntPair kernel_size, std::optional<IntPair> stride = std::nullopt,
                  IntPair padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<std::int64_t> divisor_override = std::nullopt);
/// torch.nn.functional.avg_pool1d over (N, C, L) or (C, L).
Tensor avg_pool1d(const Tensor& input, std::int64_t kernel_size, std::optional<std::int64_t> stride = std::nullopt,
                  std::int64_t padding = 0, bool ceil_mode = false, bool count_include_pad = true);
/// torch.nn.functional.adaptive_avg_pool2d: output (N, C, oH, oW); window i of a dimension of
/// size S covers [floor(i S / o), ceil((i + 1) S / o)).
Tensor adaptive_avg_pool2d(const Tensor& input, IntPair output_size);

/// torch.nn.functional.batch_norm over (N, C, *): per channel, (x - mean) / sqrt(var + eps) *
/// weight + bias. Training: the batch's mean and biased variance, and running_mean/running_var
/// (if defined, shape (C)) updated in place outside autograd: r = (1 - momentum) r + momentum s,
/// with the unbiased variance for running_var. Not training: the running statistics (required).
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

/// torch.nn.functional.group_norm over (N, C, *): mean and biased variance over each group of
/// C / num_groups channels (and all positions) per sample; weight and bias (C) per channel.
Tensor group_norm(const Tensor& input, std::int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace tg
