#pragma once
// Finite-difference gradient checking in float64, like torch.autograd.gradcheck: every element
// of every input that requires grad is perturbed by ±eps, and each column of the numerical
// Jacobian is compared with the analytic one from backward():
//   |analytic - numeric| <= atol + rtol * |numeric|
//
//   auto report = tg::gradcheck([](const std::vector<Tensor>& in) { return tg::tanh(in[0]); },
//                               {Tensor::uniform({3, 4}, -1, 1, gen, DType::f64).requires_grad_()});
//   if (!report) std::cerr << report;   // names the input, element and both values
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace tg {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckReport {
  bool ok = true;
  std::int64_t checked = 0;      // Jacobian entries compared
  int input = -1;                // worst mismatch: input position,
  std::int64_t element = -1;     //   flat element index in that input,
  std::int64_t output = -1;      //   flat output element index,
  double analytic = 0, numeric = 0;
  double max_abs_error = 0;      // over all entries
  std::string message;           // human-readable summary (empty when ok)
  explicit operator bool() const { return ok; }
};

std::ostream& operator<<(std::ostream& os, const GradcheckReport& report);

/// Checks d fn(inputs) / d inputs[i] for every input with requires_grad (all must be float64;
/// other inputs, e.g. i64 indices, are passed through). fn may return any shape; it is re-run
/// for every perturbation, so it must be deterministic (fix the seed of any dropout inside). The
/// finite-difference evaluations run under NoGradGuard: a fn that takes gradients itself (tg::grad
/// inside, as a gradient penalty) opens an EnableGradGuard first.
GradcheckReport gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

/// Second-order check, like torch.autograd.gradgradcheck: gradcheck of the vector-Jacobian
/// product (inputs, v) -> d<fn(inputs), v>/d inputs (every input with requires_grad), computed
/// with tg::grad(..., {.create_graph = true}), with respect to the inputs and to v. So it checks
/// that each op's backward is itself correctly differentiated. `grad_output` is v (fn's output
/// shape, float64); undefined: uniform in [-1, 1) from a fixed seed. fn must be deterministic.
GradcheckReport gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                              const std::vector<Tensor>& inputs, const Tensor& grad_output = Tensor(),
                              const GradcheckOptions& options = {});

}  // namespace tg
