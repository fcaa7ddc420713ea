#pragma once
// tg::autograd::Function: a custom differentiable op written as a static forward and a static
// backward that share a context, as LibTorch's torch::autograd::Function:
//
//   struct Cube : tg::autograd::Function<Cube> {
//     static Tensor forward(AutogradContext& ctx, const Tensor& x) {
//       ctx.save_for_backward({x});
//       return x * x * x;                              // runs under NoGradGuard: nothing recorded
//     }
//     static tensor_list backward(AutogradContext& ctx, tensor_list grad_outputs) {
//       const Tensor x = ctx.get_saved_variables()[0];
//       return {grad_outputs[0] * 3.0 * x * x};        // one entry per forward argument
//     }
//   };
//   Tensor y = Cube::apply(x);
//
// Rules (as LibTorch's, with the differences noted):
// - forward(ctx, args...) takes the context (`AutogradContext&` or LibTorch's `AutogradContext*`)
//   and any arguments; the Tensor arguments are the op's inputs. It returns a Tensor or a
//   tensor_list. It runs with gradient recording off.
// - backward(ctx, grad_outputs) gets one gradient per output (zeros for an output that received
//   none, unless set_materialize_grads(false): then undefined) and returns one entry per forward
//   argument, in order: the gradient of a Tensor argument (undefined = zero) and an undefined
//   Tensor for every other argument. Too few entries, a defined extra one, or a wrong shape or
//   dtype for an input that needs a gradient throws std::invalid_argument naming the Function.
//   Gradients are added to the inputs' (backward never overwrites).
// - needs_input_grad(i) is indexed by forward argument, as ctx.needs_input_grad in Python
//   (LibTorch indexes by tensor input).
// - Outputs of integer dtype and outputs given to mark_non_differentiable() do not require grad.
// - A Function with several outputs is recorded as one tape node per differentiable output, each
//   calling backward with its own gradient and zeros for the others (backward is linear in
//   grad_outputs, so the input gradients add up to the same): backward runs once per output that
//   receives a gradient. A single-output Function runs it once.
// - Tensor arguments are passed as `Tensor` or `const Tensor&`; a tensor_list argument is passed
//   through as a non-tensor value (its elements are not inputs).
// - Higher-order gradients: in a backward with create_graph, backward runs with recording on,
//   on the tensors it saved (the forward's inputs as given, graph tensors; a saved output as the
//   op's output in the graph) and on grad_outputs that require grad, so a backward written with tg
//   ops is differentiable, as in LibTorch. With several outputs, the backward run for output j
//   sees output j that way and the other saved outputs as constants.
// The tape node is named after the C++ type ("Cube"), which is what anomaly mode reports.
#include <any>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "autograd/tape.h"
#include "autograd/tensor.h"

namespace tg::autograd {

using tensor_list = std::vector<Tensor>;
/// LibTorch's name for the same type.
using variable_list = tensor_list;

/// A non-tensor value kept in AutogradContext::saved_data (LibTorch's IValue, reduced to what a
/// backward needs): any copyable value, read back with to<T>() or the converting accessors.
class SavedValue {
 public:
  SavedValue() = default;
  template <class T, class = std::enable_if_t<!std::is_same_v<std::decay_t<T>, SavedValue>>>
  SavedValue(T&& value) : value_(std::forward<T>(value)) {}  // NOLINT: implicit, as IValue

  bool has_value() const { return value_.has_value(); }
  /// The value as exactly T; std::invalid_argument naming both types if it holds another.
  template <class T> const T& to() const {
    if (const T* p = std::any_cast<T>(&value_)) return *p;
    throw_type(typeid(T));
  }
  /// A stored double, float, integer or bool as double.
  double toDouble() const;
  /// A stored int64_t, int, long long, size_t or bool as int64 (another type throws).
  std::int64_t toInt() const;
  bool toBool() const;
  Tensor toTensor() const { return to<Tensor>(); }

 private:
  [[noreturn]] void throw_type(const std::type_info& wanted) const;
  std::any value_;
};

template <class T> struct Function;

/// What forward leaves for backward: saved tensors, saved non-tensor data, and which inputs need a
/// gradient.
class AutogradContext {
 public:
  /// Keeps `to_save` (inputs or outputs of forward) for backward. Replaces an earlier call's list.
  void save_for_backward(tensor_list to_save) { saved_ = std::move(to_save); }
  /// The tensors given to save_for_backward, in order.
  const tensor_list& get_saved_variables() const { return saved_; }
  /// Non-tensor values for backward: ctx.saved_data["alpha"] = 0.5; ... .toDouble().
  std::map<std::string, SavedValue> saved_data;
  /// Whether forward argument `i` is a Tensor whose gradient is wanted (it requires grad and
  /// gradients are being recorded). False out of range.
  bool needs_input_grad(std::size_t i) const { return i < needs_input_grad_.size() && needs_input_grad_[i]; }
  /// Outputs of forward that get no gradient (indices, masks): returned without requires_grad.
  void mark_non_differentiable(const tensor_list& outputs);
  /// false: backward sees an undefined tensor, not zeros, for an output that received no gradient.
  void set_materialize_grads(bool value) { materialize_grads_ = value; }
  bool materialize_grads() const { return materialize_grads_; }

 private:
  template <class T> friend struct Function;
  bool is_non_differentiable(const Tensor& t) const;
  /// Which of `inputs` and `output` the saved tensors are (by buffer), for the tape's version check.
  Saves saves_for(const tensor_list& inputs, const Tensor& output) const;
  /// saved_ with the entries that are output `j` (by TensorImpl) given as the node's graph output.
  tensor_list saved_with_graph_output(GradGraphContext& gctx, int j) const;
  std::vector<bool> needs_input_grad_;
  tensor_list saved_;
  std::vector<const void*> output_impls_;  // forward's outputs before recording, compared only
  std::vector<const void*> non_differentiable_;  // TensorImpl addresses, compared only
  bool materialize_grads_ = true;
};

namespace detail {

/// Demangled C++ name of a Function type, kept for the program's lifetime (tape node names).
const char* function_name(const std::type_info& type);

/// Shapes and argument layout of one apply(), shared by the nodes of its outputs.
struct FunctionRecord {
  const char* name;
  std::vector<int> input_slot;  // forward argument -> position among the tensor inputs, or -1
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;
  std::vector<Shape> output_shapes;
  std::vector<DType> output_dtypes;
};

/// The gradient list backward receives at the node of output `j`.
tensor_list function_grad_outputs(const FunctionRecord& record, const AutogradContext& ctx, int j);
/// Checks backward's result against the forward arguments and adds it to the inputs' gradients.
void function_accumulate(const FunctionRecord& record, BackwardContext& bctx, tensor_list grads);
/// The same in a backward with create_graph (the additions recorded).
void function_accumulate(const FunctionRecord& record, GradGraphContext& bctx, tensor_list grads);

template <class A> inline constexpr bool is_tensor_arg_v = std::is_same_v<std::decay_t<A>, Tensor>;

}  // namespace detail

/// Base of a custom op: `struct MyOp : Function<MyOp> { static ... forward(...); static tensor_list
/// backward(...); };` then `MyOp::apply(args...)`.
template <class T>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    constexpr std::size_t n_args = sizeof...(Args);
    auto ctx = std::make_shared<AutogradContext>();
    auto rec = std::make_shared<detail::FunctionRecord>();
    rec->name = detail::function_name(typeid(T));
    rec->input_slot.assign(n_args, -1);
    ctx->needs_input_grad_.assign(n_args, false);
    tensor_list inputs;
    const bool recording = GradMode::enabled();
    bool any_needs = false;
    std::size_t a = 0;
    (
        [&](const auto& arg) {
          if constexpr (detail::is_tensor_arg_v<decltype(arg)>) {
            rec->input_slot[a] = static_cast<int>(inputs.size());
            inputs.push_back(arg);
            rec->input_shapes.push_back(arg.defined() ? arg.shape() : Shape{});
            rec->input_dtypes.push_back(arg.defined() ? arg.dtype() : DType::f32);
            const bool needs = recording && arg.defined() && arg.requires_grad();
            ctx->needs_input_grad_[a] = needs;
            any_needs = any_needs || needs;
          }
          ++a;
        }(args),
        ...);

    using Out = decltype(call_forward(std::declval<AutogradContext&>(), std::forward<Args>(args)...));
    static_assert(std::is_same_v<Out, Tensor> || std::is_same_v<Out, tensor_list>,
                  "autograd::Function: forward returns Tensor or tensor_list");
    Out out;
    {
      NoGradGuard no_grad;
      out = call_forward(*ctx, std::forward<Args>(args)...);
    }
    if constexpr (std::is_same_v<Out, Tensor>) {
      if (!any_needs || !out.defined() || !is_floating(out.dtype()) || ctx->is_non_differentiable(out)) return out;
      ctx->output_impls_ = {out.impl()};
      rec->output_shapes = {out.shape()};
      rec->output_dtypes = {out.dtype()};
      const Saves saves = ctx->saves_for(inputs, out);
      return record(
          rec->name, std::move(out), inputs, saves, [ctx, rec](BackwardContext& bctx) { run_backward(*ctx, *rec, bctx, 0); },
          [ctx, rec](GradGraphContext& gctx) { run_backward(*ctx, *rec, gctx, 0); });
    } else {
      if (!any_needs) return out;
      for (const Tensor& o : out) {
        rec->output_shapes.push_back(o.defined() ? o.shape() : Shape{});
        rec->output_dtypes.push_back(o.defined() ? o.dtype() : DType::f32);
        ctx->output_impls_.push_back(o.defined() ? o.impl() : nullptr);
      }
      for (std::size_t j = 0; j < out.size(); ++j) {
        if (!out[j].defined() || !is_floating(out[j].dtype()) || ctx->is_non_differentiable(out[j])) continue;
        const int jj = static_cast<int>(j);
        const Saves saves = ctx->saves_for(inputs, out[j]);
        out[j] = record(
            rec->name, std::move(out[j]), inputs, saves,
            [ctx, rec, jj](BackwardContext& bctx) { run_backward(*ctx, *rec, bctx, jj); },
            [ctx, rec, jj](GradGraphContext& gctx) { run_backward(*ctx, *rec, gctx, jj); });
      }
      return out;
    }
  }

 private:
  template <class... Args>
  static auto call_forward(AutogradContext& ctx, Args&&... args) {
    if constexpr (requires { T::forward(ctx, std::forward<Args>(args)...); })
      return T::forward(ctx, std::forward<Args>(args)...);
    else
      return T::forward(&ctx, std::forward<Args>(args)...);
  }

  // Context: BackwardContext, or GradGraphContext under create_graph, where backward's ops (on
  // the graph tensors it saved and on grad_output) are recorded, so its result is differentiable.
  template <class Context>
  static void run_backward(AutogradContext& ctx, const detail::FunctionRecord& rec, Context& bctx, int j) {
    tensor_list grad_outputs = detail::function_grad_outputs(rec, ctx, j);
    grad_outputs[j] = bctx.grad_output();
    tensor_list grads;
    // Under create_graph a saved output must be the graph's output, not the constant forward made;
    // the saved list goes back when backward returns or throws.
    struct RestoreSaved {
      AutogradContext* ctx = nullptr;
      tensor_list kept;
      ~RestoreSaved() {
        if (ctx) ctx->saved_ = std::move(kept);
      }
    } restore;
    if constexpr (std::is_same_v<Context, GradGraphContext>) {
      restore.kept = ctx.saved_;
      restore.ctx = &ctx;
      ctx.saved_ = ctx.saved_with_graph_output(bctx, j);
    }
    if constexpr (requires { T::backward(ctx, std::move(grad_outputs)); })
      grads = T::backward(ctx, std::move(grad_outputs));
    else
      grads = T::backward(&ctx, std::move(grad_outputs));
    detail::function_accumulate(rec, bctx, std::move(grads));
  }
};

}  // namespace tg::autograd
