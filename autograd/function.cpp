#include "autograd/function.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <typeindex>
#include <unordered_map>

namespace tg::autograd {

namespace {
std::string demangle(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = (status == 0 && d) ? d : mangled;
  std::free(d);
  return out;
}
}  // namespace

void SavedValue::throw_type(const std::type_info& wanted) const {
  throw std::invalid_argument("autograd::Function saved_data: value holds " +
                              (value_.has_value() ? demangle(value_.type().name()) : std::string("nothing")) +
                              ", read as " + demangle(wanted.name()));
}

double SavedValue::toDouble() const {
  if (const auto* p = std::any_cast<double>(&value_)) return *p;
  if (const auto* p = std::any_cast<float>(&value_)) return *p;
  if (value_.type() == typeid(bool)) return toBool() ? 1.0 : 0.0;
  return static_cast<double>(toInt());
}

std::int64_t SavedValue::toInt() const {
  if (const auto* p = std::any_cast<std::int64_t>(&value_)) return *p;
  if (const auto* p = std::any_cast<int>(&value_)) return *p;
  if (const auto* p = std::any_cast<long long>(&value_)) return *p;
  if (const auto* p = std::any_cast<std::size_t>(&value_)) return static_cast<std::int64_t>(*p);
  if (const auto* p = std::any_cast<bool>(&value_)) return *p ? 1 : 0;
  throw_type(typeid(std::int64_t));
}

bool SavedValue::toBool() const { return to<bool>(); }

void AutogradContext::mark_non_differentiable(const tensor_list& outputs) {
  for (const Tensor& t : outputs)
    if (t.defined()) non_differentiable_.push_back(t.impl());
}

Saves AutogradContext::saves_for(const tensor_list& inputs, const Tensor& output) const {
  auto saved = [&](const Tensor& t) {
    for (const Tensor& s : saved_)
      if (s.defined() && t.defined() && s.shares_storage(t)) return true;
    return false;
  };
  Saves saves = Saves::none();
  for (std::size_t k = 0; k < inputs.size(); ++k) saves = saves.and_input(static_cast<int>(k), saved(inputs[k]));
  return saves.and_output(saved(output));
}

bool AutogradContext::is_non_differentiable(const Tensor& t) const {
  return std::find(non_differentiable_.begin(), non_differentiable_.end(), t.impl()) != non_differentiable_.end();
}

tensor_list AutogradContext::saved_with_graph_output(GradGraphContext& gctx, int j) const {
  tensor_list saved = saved_;
  const void* output = static_cast<std::size_t>(j) < output_impls_.size() ? output_impls_[j] : nullptr;
  for (Tensor& t : saved)
    if (output && t.defined() && t.impl() == output) t = gctx.output(t);
  return saved;
}

namespace detail {

const char* function_name(const std::type_info& type) {
  // Node names must outlive the tape: one string per Function type, never freed.
  static std::mutex mutex;
  static std::unordered_map<std::type_index, std::unique_ptr<std::string>> names;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = names[std::type_index(type)];
  if (!slot) slot = std::make_unique<std::string>(demangle(type.name()));
  return slot->c_str();
}

tensor_list function_grad_outputs(const FunctionRecord& rec, const AutogradContext& ctx, int j) {
  tensor_list grads(rec.output_shapes.size());
  if (ctx.materialize_grads())
    for (std::size_t m = 0; m < grads.size(); ++m)
      if (static_cast<int>(m) != j && is_floating(rec.output_dtypes[m]))
        grads[m] = Tensor::zeros(rec.output_shapes[m], rec.output_dtypes[m]);
  return grads;
}

namespace {
template <class Context>
void accumulate_grads(const FunctionRecord& rec, Context& bctx, tensor_list grads) {
  const std::size_t n_args = rec.input_slot.size();
  // As LibTorch: extra entries are allowed when undefined.
  for (std::size_t a = n_args; a < grads.size(); ++a)
    if (grads[a].defined())
      throw std::invalid_argument(std::string("autograd::Function '") + rec.name + "': backward returned " +
                                  std::to_string(grads.size()) + " gradients, expected " + std::to_string(n_args) +
                                  " (one per forward argument)");
  if (grads.size() < n_args)
    throw std::invalid_argument(std::string("autograd::Function '") + rec.name + "': backward returned " +
                                std::to_string(grads.size()) + " gradients, expected " + std::to_string(n_args) +
                                " (one per forward argument; undefined for non-tensor arguments)");
  for (std::size_t a = 0; a < n_args; ++a) {
    const Tensor& g = grads[a];
    if (!g.defined()) continue;
    const int slot = rec.input_slot[a];
    if (slot < 0)
      throw std::invalid_argument(std::string("autograd::Function '") + rec.name + "': backward returned a gradient for argument " +
                                  std::to_string(a) + ", which is not a Tensor (return an undefined Tensor there)");
    if (!bctx.needs_grad(slot)) continue;
    if (!(g.shape() == rec.input_shapes[slot]) || g.dtype() != rec.input_dtypes[slot])
      throw std::invalid_argument(std::string("autograd::Function '") + rec.name + "': gradient for argument " +
                                  std::to_string(a) + " has shape " + g.shape().str() + " " +
                                  std::string(dtype_name(g.dtype())) + ", expected " + rec.input_shapes[slot].str() + " " +
                                  std::string(dtype_name(rec.input_dtypes[slot])));
    bctx.accumulate(slot, g);
  }
}
}  // namespace

void function_accumulate(const FunctionRecord& rec, BackwardContext& bctx, tensor_list grads) {
  accumulate_grads(rec, bctx, std::move(grads));
}

void function_accumulate(const FunctionRecord& rec, GradGraphContext& bctx, tensor_list grads) {
  accumulate_grads(rec, bctx, std::move(grads));
}

}  // namespace detail

}  // namespace tg::autograd
