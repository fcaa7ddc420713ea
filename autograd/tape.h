#pragma once
// The tape: a thread-local, append-only record of differentiable ops in execution order.
// backward() walks it in reverse from one tensor and accumulates gradients into leaves.
//
// Writing an op (see docs/extending.md): compute the output with a kernel, then
//
//   return record("tanh", y, {x}, [y](BackwardContext& ctx) {
//     ctx.accumulate(0, tanh_backward(ctx.grad_output(), y));
//   });
//
// The closure captures only what the backward needs. Rules: never modify grad_output() or a
// captured tensor in place; accumulate() adds, so an op whose input appears twice just calls it
// twice.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace tg {

struct AutogradMeta {
  Tensor grad;                  // leaves: accumulated gradient; op outputs: pending during backward
  bool requires_grad = false;
  bool is_leaf = true;
  std::int64_t node = -1;       // index of the producing node on its tape
  std::uint64_t epoch = 0;      // tape epoch of that node (a reset tape starts a new epoch)
  const void* tape = nullptr;   // the thread-local tape it was recorded on
};

class BackwardContext;
using BackwardFn = std::function<void(BackwardContext&)>;

/// What an op's backward closure sees: the gradient of its output, and a sink for the
/// gradients of its inputs (by position in the input list given to record()).
class BackwardContext {
 public:
  const Tensor& grad_output() const { return grad_output_; }
  /// False when input `i` does not require grad: the closure may skip computing it.
  bool needs_grad(int i) const;
  /// Adds `grad` (shape and dtype of input i) to input i's gradient.
  void accumulate(int i, Tensor grad);
  /// Input i's gradient buffer (zeros if none yet), to add into in place: a fused kernel whose
  /// input is read at every time step accumulates there instead of allocating a gradient per
  /// step. Only for inputs with needs_grad(i); never keep the reference past the closure.
  Tensor& grad_buffer(int i);

 private:
  friend class Engine;
  BackwardContext(void* node, Tensor grad_output) : node_(node), grad_output_(std::move(grad_output)) {}
  void* node_;
  Tensor grad_output_;
};

/// Whether ops are recorded on this thread (false inside NoGradGuard and during backward).
struct GradMode {
  static bool enabled();
  static void set_enabled(bool enabled);
};

/// RAII: nothing is recorded while it lives, so no graph memory is kept (eval, decoding,
/// optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

namespace tape {
/// Drops every node recorded on this thread. Tensors produced before the reset can no longer
/// be differentiated through (a backward reaching them throws). backward() already frees what
/// it walks, and empties the tape when nothing else is left on it, so a training loop that calls
/// backward() every step keeps a bounded tape; reset() is for forward passes without backward.
void reset();
/// Number of nodes currently held on this thread's tape.
std::size_t size();
}  // namespace tape

namespace detail {
bool should_record(const Tensor* inputs, std::size_t n);
Tensor record_node(const char* name, Tensor output, const Tensor* inputs, std::size_t n, BackwardFn fn);
void run_backward(const Tensor& root, const Tensor& seed);
}  // namespace detail

/// Records `output` as the result of op `name` applied to `inputs`, with its backward closure.
/// Returns `output`, now requiring grad, or unchanged when nothing needs recording.
template <class F>
Tensor record(const char* name, Tensor output, std::initializer_list<Tensor> inputs, F&& backward) {
  if (!detail::should_record(inputs.begin(), inputs.size())) return output;
  return detail::record_node(name, std::move(output), inputs.begin(), inputs.size(),
                             BackwardFn(std::forward<F>(backward)));
}

template <class F>
Tensor record(const char* name, Tensor output, const std::vector<Tensor>& inputs, F&& backward) {
  if (!detail::should_record(inputs.data(), inputs.size())) return output;
  return detail::record_node(name, std::move(output), inputs.data(), inputs.size(),
                             BackwardFn(std::forward<F>(backward)));
}

}  // namespace tg
