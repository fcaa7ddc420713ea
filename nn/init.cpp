#include "nn/init.h"

#include <cmath>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/random.h"

namespace tg::nn::init {

namespace {

void check(const Tensor& t, const char* who) {
  if (!t.defined()) throw std::invalid_argument(std::string(who) + ": undefined tensor");
  if (!is_floating(t.dtype()))
    throw std::invalid_argument(std::string(who) + ": expects a floating-point tensor, got " +
                                std::string(dtype_name(t.dtype())));
}

/// Writes f(i) (a double) to every element, i in order: the draw order is the element order.
template <class F> void fill_with(Tensor& t, const char* who, F&& f) {
  dispatch_floating(who, t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(f(i));
  });
  autograd::increment_version(t);  // an in-place write, as torch's init (autocast's weight cache reads it)
}

}  // namespace

std::pair<std::int64_t, std::int64_t> fans(const Tensor& tensor) {
  if (!tensor.defined() || tensor.dim() < 2)
    throw std::invalid_argument("init: fan in and fan out cannot be computed for a tensor with fewer than 2 "
                                "dimensions" + (tensor.defined() ? ", got shape " + tensor.shape().str() : ""));
  std::int64_t receptive = 1;
  for (int i = 2; i < tensor.dim(); ++i) receptive *= tensor.size(i);
  return {tensor.size(1) * receptive, tensor.size(0) * receptive};
}

namespace {
/// The overloads without a generator: f(default_generator()) under its mutex.
template <class F> Tensor with_default_generator(F&& f) {
  std::lock_guard<std::mutex> lock(default_generator_mutex());
  return f(default_generator());
}
}  // namespace

Tensor uniform_(Tensor tensor, double a, double b, Generator& generator) { return uniform_(std::move(tensor), generator, a, b); }
Tensor uniform_(Tensor tensor, double a, double b) {
  return with_default_generator([&](Generator& g) { return uniform_(std::move(tensor), g, a, b); });
}
Tensor normal_(Tensor tensor, double mean, double std, Generator& generator) {
  return normal_(std::move(tensor), generator, mean, std);
}
Tensor normal_(Tensor tensor, double mean, double std) {
  return with_default_generator([&](Generator& g) { return normal_(std::move(tensor), g, mean, std); });
}
Tensor xavier_uniform_(Tensor tensor, double gain, Generator& generator) {
  return xavier_uniform_(std::move(tensor), generator, gain);
}
Tensor xavier_uniform_(Tensor tensor, double gain) {
  return with_default_generator([&](Generator& g) { return xavier_uniform_(std::move(tensor), g, gain); });
}
Tensor xavier_normal_(Tensor tensor, double gain, Generator& generator) {
  return xavier_normal_(std::move(tensor), generator, gain);
}
Tensor xavier_normal_(Tensor tensor, double gain) {
  return with_default_generator([&](Generator& g) { return xavier_normal_(std::move(tensor), g, gain); });
}
Tensor kaiming_uniform_(Tensor tensor, double a, FanMode mode, Generator& generator) {
  return kaiming_uniform_(std::move(tensor), generator, a, mode);
}
Tensor kaiming_uniform_(Tensor tensor, double a, FanMode mode) {
  return with_default_generator([&](Generator& g) { return kaiming_uniform_(std::move(tensor), g, a, mode); });
}
Tensor kaiming_normal_(Tensor tensor, double a, FanMode mode, Generator& generator) {
  check(tensor, "kaiming_normal_");
  const auto [fan_in, fan_out] = fans(tensor);
  const double fan = static_cast<double>(mode == FanMode::fan_in ? fan_in : fan_out);
  if (fan == 0) return tensor;  // empty tensor: nothing to draw (torch warns and returns)
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  return normal_(std::move(tensor), generator, 0.0, gain / std::sqrt(fan));
}
Tensor kaiming_normal_(Tensor tensor, double a, FanMode mode) {
  return with_default_generator([&](Generator& g) { return kaiming_normal_(std::move(tensor), a, mode, g); });
}
Tensor orthogonal_(Tensor tensor, double gain, Generator& generator) { return orthogonal_(std::move(tensor), generator, gain); }
Tensor orthogonal_(Tensor tensor, double gain) {
  return with_default_generator([&](Generator& g) { return orthogonal_(std::move(tensor), g, gain); });
}

Tensor uniform_(Tensor tensor, Generator& gen, double a, double b) {
  check(tensor, "uniform_");
  fill_with(tensor, "uniform_", [&](std::int64_t) { return a + (b - a) * gen.uniform(); });
  return tensor;
}

Tensor normal_(Tensor tensor, Generator& gen, double mean, double std) {
  check(tensor, "normal_");
  fill_with(tensor, "normal_", [&](std::int64_t) { return mean + std * gen.normal(); });
  return tensor;
}

Tensor constant_(Tensor tensor, double value) {
  check(tensor, "constant_");
  tensor.fill_(value);
  return tensor;
}
Tensor zeros_(Tensor tensor) { return constant_(std::move(tensor), 0.0); }
Tensor ones_(Tensor tensor) { return constant_(std::move(tensor), 1.0); }

Tensor xavier_uniform_(Tensor tensor, Generator& gen, double gain) {
  check(tensor, "xavier_uniform_");
  const auto [fan_in, fan_out] = fans(tensor);
  const double a = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform_(std::move(tensor), gen, -a, a);
}

Tensor xavier_normal_(Tensor tensor, Generator& gen, double gain) {
  check(tensor, "xavier_normal_");
  const auto [fan_in, fan_out] = fans(tensor);
  return normal_(std::move(tensor), gen, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)));
}

Tensor kaiming_uniform_(Tensor tensor, Generator& gen, double a, FanMode mode) {
  check(tensor, "kaiming_uniform_");
  const auto [fan_in, fan_out] = fans(tensor);
  const double fan = static_cast<double>(mode == FanMode::fan_in ? fan_in : fan_out);
  if (fan == 0) return tensor;  // empty tensor: nothing to draw (torch warns and returns)
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = std::sqrt(3.0) * gain / std::sqrt(fan);
  return uniform_(std::move(tensor), gen, -bound, bound);
}

void linear_default_(Tensor weight, Tensor bias, Generator& gen) {
  kaiming_uniform_(weight, gen, std::sqrt(5.0));
  if (bias.defined()) {
    const auto fan_in = fans(weight).first;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    uniform_(std::move(bias), gen, -bound, bound);
  }
}

Tensor orthogonal_(Tensor tensor, Generator& gen, double gain) {
  check(tensor, "orthogonal_");
  if (tensor.dim() < 2)
    throw std::invalid_argument("orthogonal_: only tensors with 2 or more dimensions are supported, got shape " +
                                tensor.shape().str());
  if (tensor.numel() == 0) return tensor;
  const std::int64_t rows = tensor.size(0), cols = tensor.numel() / rows;
  // Work on the tall matrix A (m x n, m >= n), column-major so that columns are contiguous.
  const bool transposed = rows < cols;
  const std::int64_t m = transposed ? cols : rows, n = transposed ? rows : cols;
  std::vector<double> draws(static_cast<std::size_t>(rows * cols));
  for (auto& d : draws) d = gen.normal();  // the (rows, cols) normal matrix, row-major
  std::vector<double> A(static_cast<std::size_t>(m * n));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double x = draws[r * cols + c];
      if (transposed) A[r * m + c] = x;  // A = Wᵀ: A(c, r), column r
      else A[c * m + r] = x;             // A = W: A(r, c), column c
    }

  // Householder QR: reflector k maps A[k:, k] onto alpha e_k; the reflectors are kept in V.
  std::vector<double> V(static_cast<std::size_t>(m * n), 0.0), diag(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) {
    double* a = &A[k * m];
    double norm2 = 0;
    for (std::int64_t i = k; i < m; ++i) norm2 += a[i] * a[i];
    const double norm = std::sqrt(norm2);
    const double alpha = a[k] > 0 ? -norm : norm;  // opposite sign to a[k]: no cancellation
    double* v = &V[k * m];
    for (std::int64_t i = k; i < m; ++i) v[i] = a[i];
    v[k] -= alpha;
    double vnorm2 = 0;
    for (std::int64_t i = k; i < m; ++i) vnorm2 += v[i] * v[i];
    diag[k] = alpha;
    if (vnorm2 == 0) continue;  // column already zero below the diagonal: identity reflector
    const double inv = 1.0 / std::sqrt(vnorm2);
    for (std::int64_t i = k; i < m; ++i) v[i] *= inv;
    for (std::int64_t j = k; j < n; ++j) {  // A[k:, j] -= 2 v (vᵀ A[k:, j])
      double* aj = &A[j * m];
      double dot = 0;
      for (std::int64_t i = k; i < m; ++i) dot += v[i] * aj[i];
      for (std::int64_t i = k; i < m; ++i) aj[i] -= 2 * dot * v[i];
    }
  }
  // Q (m x n) = H_0 ... H_{n-1} I[:, :n], applied right to left; then column j *= sign(R_jj).
  std::vector<double> Q(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t j = 0; j < n; ++j) Q[j * m + j] = 1.0;
  for (std::int64_t k = n - 1; k >= 0; --k) {
    const double* v = &V[k * m];
    for (std::int64_t j = 0; j < n; ++j) {
      double* qj = &Q[j * m];
      double dot = 0;
      for (std::int64_t i = k; i < m; ++i) dot += v[i] * qj[i];
      for (std::int64_t i = k; i < m; ++i) qj[i] -= 2 * dot * v[i];
    }
  }
  for (std::int64_t j = 0; j < n; ++j)
    if (diag[j] < 0)
      for (std::int64_t i = 0; i < m; ++i) Q[j * m + i] = -Q[j * m + i];

  // W = Q (rows x cols) or Qᵀ when transposed; element (r, c) of W in row-major order.
  fill_with(tensor, "orthogonal_", [&](std::int64_t flat) {
    const std::int64_t r = flat / cols, c = flat % cols;
    return gain * (transposed ? Q[r * m + c] : Q[c * m + r]);
  });
  return tensor;
}

}  // namespace tg::nn::init
