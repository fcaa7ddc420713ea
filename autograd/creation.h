#pragma once
// Tensor creation as PyTorch's free functions (torch.zeros_like, torch.arange, torch.eye, ...).
// Random ones take an explicit Generator: tapegrad has no hidden global random state.
// None of them records anything: the results are leaves (call requires_grad_() to train them).
#include <cstdint>

#include "autograd/tensor.h"

namespace tg {

class Generator;

Tensor zeros(const Shape& shape, DType dtype = DType::f32);
Tensor ones(const Shape& shape, DType dtype = DType::f32);
Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
/// Elements left uninitialised (torch.empty): every one must be written before it is read.
Tensor empty(const Shape& shape, DType dtype = DType::f32);

/// x's shape and dtype (unless `dtype` is given), filled as named.
Tensor zeros_like(const Tensor& x);
Tensor zeros_like(const Tensor& x, DType dtype);
Tensor ones_like(const Tensor& x);
Tensor ones_like(const Tensor& x, DType dtype);
Tensor full_like(const Tensor& x, double value);
Tensor full_like(const Tensor& x, double value, DType dtype);
Tensor empty_like(const Tensor& x);
/// Uniform in [0, 1) / standard normal, x's shape and dtype (floating), from `gen`.
Tensor rand_like(const Tensor& x, Generator& gen);
Tensor randn_like(const Tensor& x, Generator& gen);

/// [0, end) in steps of 1 (torch.arange(end)); i64 by default, as PyTorch for integer bounds.
Tensor arange(std::int64_t end, DType dtype = DType::i64);
/// [start, end) in steps of `step` (torch.arange(start, end, step)); float32 unless `dtype` says
/// otherwise, also for integer bounds such as arange(0, 5) (torch: int64).
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::f32);
/// `steps` evenly spaced values from start to end, both included (torch.linspace); steps >= 0.
Tensor linspace(double start, double end, std::int64_t steps, DType dtype = DType::f32);
/// (n, m) with ones on the diagonal (torch.eye); m = n when negative (omitted).
Tensor eye(std::int64_t n, std::int64_t m = -1, DType dtype = DType::f32);

}  // namespace tg
