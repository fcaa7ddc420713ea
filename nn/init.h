#pragma once
// Parameter initialisers, as torch.nn.init, with an explicit Generator (no global random state:
// the same seed gives the same values). Each fills the tensor in place, outside autograd, and
// returns it. Values are drawn in double and rounded to the tensor's dtype.
//
// Fans (torch's _calculate_fan_in_and_fan_out): a weight of shape (out, in, k1, k2, ...) has
// receptive field r = k1*k2*...; fan_in = in*r, fan_out = out*r. So for a Linear weight
// (out_features, in_features), fan_in = in_features. Tensors with fewer than 2 dims have no fans.
#include <cstdint>
#include <utility>

#include "autograd/tensor.h"

namespace tg {
class Generator;
}

namespace tg::nn::init {

/// Which fan kaiming_uniform_ scales by (fan_in preserves forward variance, fan_out backward).
enum class FanMode { fan_in, fan_out };

/// (fan_in, fan_out) as described above; throws for tensors with fewer than 2 dimensions.
std::pair<std::int64_t, std::int64_t> fans(const Tensor& tensor);

/// Uniform in [a, b).
Tensor uniform_(Tensor tensor, Generator& gen, double a = 0.0, double b = 1.0);
/// Normal with the given mean and standard deviation.
Tensor normal_(Tensor tensor, Generator& gen, double mean = 0.0, double std = 1.0);
/// Fills with 0.
Tensor zeros_(Tensor tensor);
/// Fills with 1.
Tensor ones_(Tensor tensor);
/// Fills with `value`.
Tensor constant_(Tensor tensor, double value);

/// Glorot: uniform(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor tensor, Generator& gen, double gain = 1.0);
/// Glorot: normal(0, std) with std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_normal_(Tensor tensor, Generator& gen, double gain = 1.0);

/// He: uniform(-b, b) with b = sqrt(3) * gain / sqrt(fan), gain = sqrt(2 / (1 + a²)) (leaky_relu
/// with negative slope a). With a = sqrt(5), as torch.nn.Linear uses, b = 1 / sqrt(fan_in).
Tensor kaiming_uniform_(Tensor tensor, Generator& gen, double a = 0.0, FanMode mode = FanMode::fan_in);

/// torch.nn.Linear.reset_parameters: weight (out, in) ~ kaiming_uniform_(a = sqrt(5)), i.e.
/// uniform(±1/sqrt(in)), and bias (if defined) ~ uniform(±1/sqrt(in)).
void linear_default_(Tensor weight, Tensor bias, Generator& gen);

/// (Semi-)orthogonal matrix times `gain`, as torch.nn.init.orthogonal_: the tensor is viewed as
/// (rows = size(0), cols = numel / rows); a standard normal matrix (transposed if rows < cols) is
/// factored Q R by Householder reflections in double, and Q's columns are multiplied by
/// sign(diag R) so that Q is the unique factor with a positive R diagonal. Rows are orthonormal
/// when rows <= cols, columns otherwise.
Tensor orthogonal_(Tensor tensor, Generator& gen, double gain = 1.0);

}  // namespace tg::nn::init
