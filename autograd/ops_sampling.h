#pragma once
// Sampling as PyTorch 1.13's torch.multinomial, randint, randperm, bernoulli and normal: the same
// names, argument order, defaults, shapes, dtypes and errors. Each op takes its Generator as the
// last argument; the overload without one draws from tg::default_generator() (holding its mutex),
// as torch does when `generator=None`. Same seed, same values, on any thread count (the draws are
// sequential, in row-major order of the output); not the values PyTorch gives for that seed (its
// generator is another mt19937). No output requires grad: sampling is not differentiable (torch's
// normal() with tensor mean/std records a zero gradient instead).
#include <cstdint>

#include "autograd/tensor.h"

namespace tg {

class Generator;

/// Indices (i64) of `num_samples` categories drawn from each row of `input`, (n) -> (num_samples)
/// or (B, n) -> (B, num_samples). The rows are non-negative weights, not necessarily normalised
/// (each is divided by its own maximum first, so any finite weights work). With replacement: each
/// sample independently with probability w_i / sum(w). Without: in the order a sequential draw
/// without replacement would give them (keys w_i / E_i with E_i ~ Exp(1), largest first, as torch);
/// when a row has fewer positive weights than `num_samples`, its zero-weight categories follow in
/// index order (torch returns them too, in unspecified order). Throws std::invalid_argument for a
/// non-floating input, a dim other than 1 or 2, num_samples <= 0, num_samples > n without
/// replacement, and (naming the row) a negative, infinite or NaN weight or a row summing to 0.
Tensor multinomial(const Tensor& input, std::int64_t num_samples, bool replacement, Generator& generator);
Tensor multinomial(const Tensor& input, std::int64_t num_samples, bool replacement = false);

/// Integers uniform in [low, high) (torch.randint), i64 by default (also f32, f64). Unbiased
/// (rejection; torch takes a modulo). Throws std::invalid_argument unless low < high.
Tensor randint(std::int64_t low, std::int64_t high, const Shape& size, Generator& generator, DType dtype = DType::i64);
Tensor randint(std::int64_t low, std::int64_t high, const Shape& size, DType dtype = DType::i64);
/// randint(0, high, size, ...).
Tensor randint(std::int64_t high, const Shape& size, Generator& generator, DType dtype = DType::i64);
Tensor randint(std::int64_t high, const Shape& size, DType dtype = DType::i64);

/// A random permutation of 0 .. n-1 (torch.randperm), i64 by default (also f32, f64): Fisher-Yates
/// with unbiased draws. n >= 0.
Tensor randperm(std::int64_t n, Generator& generator, DType dtype = DType::i64);
Tensor randperm(std::int64_t n, DType dtype = DType::i64);

/// 1 with probability p, else 0, elementwise (torch.bernoulli(p)): p's shape and (floating) dtype;
/// every p in [0, 1] (p = 0 gives 0 and p = 1 gives 1 exactly).
Tensor bernoulli(const Tensor& p, Generator& generator);
Tensor bernoulli(const Tensor& p);
/// 1 with probability p (in [0, 1]), else 0, in input's shape and dtype, any dtype
/// (torch.bernoulli(input, p)); input's values are not read.
Tensor bernoulli(const Tensor& input, double p, Generator& generator);
Tensor bernoulli(const Tensor& input, double p);

/// Normal(mean, std) of the given size (torch.normal(mean, std, size)), float32 by default; std >= 0.
Tensor normal(double mean, double std, const Shape& size, Generator& generator, DType dtype = DType::f32);
Tensor normal(double mean, double std, const Shape& size, DType dtype = DType::f32);
/// Normal(mean_i, std_i) elementwise over the broadcast shape of mean and std (torch.normal(mean,
/// std)), every std >= 0. The output has mean's dtype, which must be floating; std of another dtype
/// is converted to it (as torch). A scalar on either side: that value everywhere, in the tensor's
/// shape and dtype (which must be floating).
Tensor normal(const Tensor& mean, const Tensor& std, Generator& generator);
Tensor normal(const Tensor& mean, const Tensor& std);
Tensor normal(const Tensor& mean, double std, Generator& generator);
Tensor normal(const Tensor& mean, double std);
Tensor normal(double mean, const Tensor& std, Generator& generator);
Tensor normal(double mean, const Tensor& std);

}  // namespace tg
