#pragma once
// Parameter initialisers, as torch.nn.init. Each fills the tensor in place, outside autograd, and
// returns it. Values are drawn in double and rounded to the tensor's dtype.
//
// Argument order as torch's: normal_(tensor, mean, std, generator), the generator last (torch 2.x's
// optional `generator`; 1.13 has none and always draws from the default one). Without it, the
// overloads draw from tg::default_generator() (seeded by tg::manual_seed), holding its mutex. The
// library's own layers always pass their Generator. The older order, generator second
// (normal_(tensor, gen, mean, std)), is kept for existing code; it draws the same values.
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
Tensor uniform_(Tensor tensor, double a, double b, Generator& generator);
Tensor uniform_(Tensor tensor, double a = 0.0, double b = 1.0);
/// Normal with the given mean and standard deviation.
Tensor normal_(Tensor tensor, double mean, double std, Generator& generator);
Tensor normal_(Tensor tensor, double mean = 0.0, double std = 1.0);
/// Fills with 0.
Tensor zeros_(Tensor tensor);
/// Fills with 1.
Tensor ones_(Tensor tensor);
/// Fills with `value`.
Tensor constant_(Tensor tensor, double value);

/// Glorot: uniform(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor tensor, double gain, Generator& generator);
Tensor xavier_uniform_(Tensor tensor, double gain = 1.0);
/// Glorot: normal(0, std) with std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_normal_(Tensor tensor, double gain, Generator& generator);
Tensor xavier_normal_(Tensor tensor, double gain = 1.0);

/// He: uniform(-b, b) with b = sqrt(3) * gain / sqrt(fan), gain = sqrt(2 / (1 + a²)) (leaky_relu
/// with negative slope a). With a = sqrt(5), as torch.nn.Linear uses, b = 1 / sqrt(fan_in).
/// torch's `nonlinearity` argument is not there: the gain is always leaky_relu's with slope a
/// (torch's default nonlinearity; also relu's when a = 0), hence the generator after `mode`.
Tensor kaiming_uniform_(Tensor tensor, double a, FanMode mode, Generator& generator);
Tensor kaiming_uniform_(Tensor tensor, double a = 0.0, FanMode mode = FanMode::fan_in);
/// He: normal(0, std) with std = gain / sqrt(fan), the gain as kaiming_uniform_'s.
Tensor kaiming_normal_(Tensor tensor, double a, FanMode mode, Generator& generator);
Tensor kaiming_normal_(Tensor tensor, double a = 0.0, FanMode mode = FanMode::fan_in);

/// (Semi-)orthogonal matrix times `gain`, as torch.nn.init.orthogonal_: the tensor is viewed as
/// (rows = size(0), cols = numel / rows); a standard normal matrix (transposed if rows < cols) is
/// factored Q R by Householder reflections in double, and Q's columns are multiplied by
/// sign(diag R) so that Q is the unique factor with a positive R diagonal. Rows are orthonormal
/// when rows <= cols, columns otherwise.
Tensor orthogonal_(Tensor tensor, double gain, Generator& generator);
Tensor orthogonal_(Tensor tensor, double gain = 1.0);

// ---- the older order, generator second (kept for existing code; same values as above) ---------
Tensor uniform_(Tensor tensor, Generator& gen, double a = 0.0, double b = 1.0);
Tensor normal_(Tensor tensor, Generator& gen, double mean = 0.0, double std = 1.0);
Tensor xavier_uniform_(Tensor tensor, Generator& gen, double gain = 1.0);
Tensor xavier_normal_(Tensor tensor, Generator& gen, double gain = 1.0);
Tensor kaiming_uniform_(Tensor tensor, Generator& gen, double a = 0.0, FanMode mode = FanMode::fan_in);
Tensor orthogonal_(Tensor tensor, Generator& gen, double gain = 1.0);

/// torch.nn.Linear.reset_parameters: weight (out, in) ~ kaiming_uniform_(a = sqrt(5)), i.e.
/// uniform(±1/sqrt(in)), and bias (if defined) ~ uniform(±1/sqrt(in)).
void linear_default_(Tensor weight, Tensor bias, Generator& gen);

}  // namespace tg::nn::init
