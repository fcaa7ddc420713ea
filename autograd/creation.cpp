#include "autograd/creation.h"

#include <stdexcept>
#include <string>

#include "autograd/dtype.h"
#include "autograd/random.h"

namespace tg {

Tensor zeros(const Shape& shape, DType dtype) { return Tensor::zeros(shape, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return Tensor::ones(shape, dtype); }
Tensor full(const Shape& shape, double value, DType dtype) { return Tensor::full(shape, value, dtype); }
Tensor empty(const Shape& shape, DType dtype) { return Tensor::empty(shape, dtype); }

Tensor zeros_like(const Tensor& x) { return Tensor::zeros(x.shape(), x.dtype()); }
Tensor zeros_like(const Tensor& x, DType dtype) { return Tensor::zeros(x.shape(), dtype); }
Tensor ones_like(const Tensor& x) { return Tensor::ones(x.shape(), x.dtype()); }
Tensor ones_like(const Tensor& x, DType dtype) { return Tensor::ones(x.shape(), dtype); }
Tensor full_like(const Tensor& x, double value) { return Tensor::full(x.shape(), value, x.dtype()); }
Tensor full_like(const Tensor& x, double value, DType dtype) { return Tensor::full(x.shape(), value, dtype); }
Tensor empty_like(const Tensor& x) { return Tensor::empty(x.shape(), x.dtype()); }

Tensor rand_like(const Tensor& x, Generator& gen) {
  if (!is_floating(x.dtype()))
    throw std::invalid_argument("rand_like: needs a floating tensor, got " + std::string(dtype_name(x.dtype())) + " " +
                                x.shape().str());
  return Tensor::uniform(x.shape(), 0.0, 1.0, gen, x.dtype());
}

Tensor randn_like(const Tensor& x, Generator& gen) {
  if (!is_floating(x.dtype()))
    throw std::invalid_argument("randn_like: needs a floating tensor, got " + std::string(dtype_name(x.dtype())) + " " +
                                x.shape().str());
  return Tensor::normal(x.shape(), 0.0, 1.0, gen, x.dtype());
}

Tensor arange(std::int64_t end, DType dtype) { return Tensor::arange(0, static_cast<double>(end), 1.0, dtype); }
Tensor arange(double start, double end, double step, DType dtype) { return Tensor::arange(start, end, step, dtype); }

Tensor linspace(double start, double end, std::int64_t steps, DType dtype) {
  if (steps < 0) throw std::invalid_argument("linspace: steps must be >= 0, got " + std::to_string(steps));
  std::vector<double> v(static_cast<std::size_t>(steps));
  // As PyTorch: the first half counts up from start, the second half down from end, so both
  // ends are exact.
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  const std::int64_t half = steps == 1 ? 1 : steps / 2;  // one step: just start, as PyTorch
  for (std::int64_t i = 0; i < steps; ++i)
    v[static_cast<std::size_t>(i)] = i < half ? start + step * static_cast<double>(i)
                                              : end - step * static_cast<double>(steps - 1 - i);
  return Tensor::from_values(v, {steps}, dtype);
}

Tensor eye(std::int64_t n, std::int64_t m, DType dtype) {
  if (m < 0) m = n;
  if (n < 0) throw std::invalid_argument("eye: n must be >= 0, got " + std::to_string(n));
  std::vector<double> v(static_cast<std::size_t>(n * m), 0.0);
  for (std::int64_t i = 0; i < std::min(n, m); ++i) v[static_cast<std::size_t>(i * m + i)] = 1.0;
  return Tensor::from_values(v, {n, m}, dtype);
}

}  // namespace tg
