#include "nn/positional_encoding.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "autograd/ops_elementwise.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"

namespace tg::nn {

namespace {

void check_options(const PositionalEncodingOptions& options, const char* layer) {
  if (options.d_model <= 0 || options.max_len <= 0)
    throw std::invalid_argument(std::string(layer) + ": d_model and max_len must be positive, got " +
                                std::to_string(options.d_model) + " and " + std::to_string(options.max_len));
}

/// x + table[start : start + T], broadcast over the batch; x (T, N, E), (N, T, E) or (T, E).
Tensor add_positions(const Tensor& x, const Tensor& table, std::int64_t start, const PositionalEncodingOptions& options,
                     const char* layer) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string(layer) + ": " + why + ", got x " + x.shape().str() + " and start " +
                                std::to_string(start));
  };
  if ((x.dim() != 2 && x.dim() != 3) || x.size(-1) != options.d_model)
    fail("x must be (T, N, d_model), (N, T, d_model) or (T, d_model) with d_model = " + std::to_string(options.d_model));
  const std::int64_t T = x.size(x.dim() == 3 && options.batch_first ? 1 : 0);
  if (start < 0 || start + T > options.max_len) fail("positions must lie in [0, max_len = " + std::to_string(options.max_len) + ")");
  Tensor p = narrow(table, 0, start, T);  // (T, E)
  if (x.dim() == 3 && !options.batch_first) p = unsqueeze(p, 1);  // (T, 1, E)
  return x + p;
}

}  // namespace

Tensor sinusoidal_position_table(std::int64_t max_len, std::int64_t d_model, DType dtype) {
  if (max_len < 0 || d_model <= 0)
    throw std::invalid_argument("sinusoidal_position_table: max_len must be >= 0 and d_model positive, got " +
                                std::to_string(max_len) + " and " + std::to_string(d_model));
  std::vector<double> values(static_cast<std::size_t>(max_len * d_model));
  const double k = -std::log(10000.0) / static_cast<double>(d_model);
  for (std::int64_t i = 0; 2 * i < d_model; ++i) {
    const double w = std::exp(static_cast<double>(2 * i) * k);
    for (std::int64_t p = 0; p < max_len; ++p) {
      const double angle = static_cast<double>(p) * w;
      values[p * d_model + 2 * i] = std::sin(angle);
      if (2 * i + 1 < d_model) values[p * d_model + 2 * i + 1] = std::cos(angle);
    }
  }
  return Tensor::from_values(values, {max_len, d_model}, dtype);
}

SinusoidalPositionalEncodingImpl::SinusoidalPositionalEncodingImpl(const PositionalEncodingOptions& options)
    : options_(options) {
  check_options(options, "SinusoidalPositionalEncoding");
  dropout = register_module("dropout", Dropout(options.dropout, options.generator));
  pe_ = register_buffer("pe", sinusoidal_position_table(options.max_len, options.d_model, DType::f64),
                        /*persistent=*/false);
  pe32_ = pe_.to(DType::f32);
}

Tensor SinusoidalPositionalEncodingImpl::forward(const Tensor& x, std::int64_t start) {
  const char* layer = "SinusoidalPositionalEncoding";
  if (x.dtype() != DType::f32 && x.dtype() != DType::f64)
    throw std::invalid_argument(std::string(layer) + ": x must be float32 or float64, got " +
                                std::string(dtype_name(x.dtype())));
  // The buffer in x's dtype; else its float32 copy, or (after to(f32), for a float64 x) a conversion.
  const Tensor table = x.dtype() == pe_.dtype() ? pe_ : x.dtype() == DType::f32 ? pe32_ : pe_.to(x.dtype());
  return dropout->forward(add_positions(x, table, start, options_, layer));
}

std::string SinusoidalPositionalEncodingImpl::extra_repr() const {
  return "d_model=" + std::to_string(options_.d_model) + ", max_len=" + std::to_string(options_.max_len);
}

LearnedPositionalEmbeddingImpl::LearnedPositionalEmbeddingImpl(const PositionalEncodingOptions& options, Generator& gen)
    : options_(options) {
  check_options(options, "LearnedPositionalEmbedding");
  weight = register_parameter("weight", Tensor::normal({options.max_len, options.d_model}, 0.0, 1.0, gen));
  dropout = register_module("dropout", Dropout(options.dropout, options.generator));
}

Tensor LearnedPositionalEmbeddingImpl::forward(const Tensor& x, std::int64_t start) {
  return dropout->forward(add_positions(x, weight, start, options_, "LearnedPositionalEmbedding"));
}

std::string LearnedPositionalEmbeddingImpl::extra_repr() const {
  return "d_model=" + std::to_string(options_.d_model) + ", max_len=" + std::to_string(options_.max_len);
}

}  // namespace tg::nn
