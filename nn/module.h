#pragma once
// Module: the base of every layer and model, as torch.nn.Module. A module owns named parameters,
// named buffers and named submodules, in registration order, and everything generic (hierarchical
// names, train/eval, dtype conversion, checkpoints, printing) works from that registry.
//
// Modules are written and held as LibTorch's (nn/module_holder.h): the class is `NameImpl`,
// TG_MODULE(Name) makes `Name` its holder, and a holder is registered, called and dereferenced
// like the Python object. The base class has no forward(): layers have different signatures, so
// each subclass adds its own, e.g.
//
//   class MlpImpl : public tg::nn::Module {
//    public:
//     MlpImpl(std::int64_t in, std::int64_t hidden, tg::Generator& gen) {
//       w1 = register_parameter("w1", tg::Tensor::uniform({hidden, in}, -0.1, 0.1, gen));
//       head = register_module("head", tg::nn::Linear(hidden, 1, gen));
//     }
//     tg::Tensor forward(const tg::Tensor& x) { return head(tg::tanh(tg::linear(x, w1))); }
//     tg::Tensor w1;                 // shares its TensorImpl with the registry entry
//     tg::nn::Linear head{nullptr};  // an empty holder until registered
//   };
//   TG_MODULE(Mlp);                  // Mlp mlp(4, 8, gen); mlp(x); mlp->head->weight
//
// Parameters and buffers are handles: the member `w1` and the registry see the same tensor, and
// operations on the registry (to(), load()) change that tensor in place, so members never go stale.
//
// Forward hooks (register_forward_pre_hook, register_forward_hook) run when a module is *called*,
// as PyTorch runs them in __call__ and not in forward(): through a holder, `layer(x)` (see
// nn/module_holder.h: the module's operator() where it has one, else forward() between the hooks
// when forward takes and returns tensors), through the operator() of the library's modules whose
// forward takes and returns tensors (Linear, Embedding, Dropout, LayerNorm, RMSNorm, the
// activations, the convolutions, poolings and norms, Sequential, TransformerEncoderLayer,
// TransformerDecoderLayer), and for every member a Sequential runs. Modules returning several
// tensors (GRU, LSTM, MultiheadAttention) or taking non-tensor arguments have no hooked call, and
// the library's composite layers call their children's forward() directly, so a hook on such a
// child (a TransformerEncoderLayer's linear1) does not run; PyTorch's would.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/tensor.h"
#include "nn/module_holder.h"

namespace tg::nn {

/// (qualified name, tensor) pairs in registration order, as a PyTorch state_dict.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module;
/// Called before forward with the module and its tensor inputs (in argument order; undefined for
/// an omitted optional tensor); returning inputs replaces them (same count), std::nullopt keeps them.
using ForwardPreHook = std::function<std::optional<std::vector<Tensor>>(const Module& module, const std::vector<Tensor>& inputs)>;
/// Called after forward with the module, the inputs forward received and its output; returning a
/// tensor replaces the output, std::nullopt keeps it.
using ForwardHook =
    std::function<std::optional<Tensor>(const Module& module, const std::vector<Tensor>& inputs, const Tensor& output)>;

struct ForwardHookRegistry;  // a module's hooks, shared with its handles (module.cpp)

/// Removes the module hook it was returned for (torch.utils.hooks.RemovableHandle). Removing
/// twice, or after the module is gone, does nothing.
class ModuleHookHandle {
 public:
  ModuleHookHandle() = default;
  void remove();

 private:
  friend class Module;
  ModuleHookHandle(std::weak_ptr<ForwardHookRegistry> hooks, std::uint64_t id) : hooks_(std::move(hooks)), id_(id) {}
  std::weak_ptr<ForwardHookRegistry> hooks_;
  std::uint64_t id_ = 0;
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Copying would silently share parameters between two "different" modules.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;

  /// Type name shown by str(); defaults to the unqualified C++ class name without a trailing
  /// "Impl" (LinearImpl and its holder Linear print as "Linear", as PyTorch's).
  virtual std::string name() const;
  /// Layer-specific summary inside the parentheses of str(), e.g. "in_features=32, out_features=10, bias=true".
  virtual std::string extra_repr() const { return {}; }

  /// Registers `tensor` as parameter `name` (a leaf; detached first if it is not one) and marks it
  /// requires_grad(requires_grad). Returns the registered handle. Names are unique per module and
  /// contain no '.'.
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  /// Registers `module` as child `name` and returns it with its own type:
  /// `fc = register_module("fc", Linear(4, 8, gen));`. Throws std::invalid_argument for an empty
  /// holder.
  template <ModuleHolderType H>
  std::remove_cvref_t<H> register_module(const std::string& name, H&& module) {
    static_assert(std::is_base_of_v<Module, typename std::remove_cvref_t<H>::ContainedType>,
                  "register_module: the held type must derive from tg::nn::Module");
    add_child(name, std::shared_ptr<Module>(module));
    return std::forward<H>(module);
  }
  /// The same for a std::shared_ptr to a module.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "register_module: M must derive from tg::nn::Module");
    add_child(name, module);
    return module;
  }
  /// Registers `tensor` as buffer `name` (torch's register_buffer): state that is not a parameter,
  /// such as BatchNorm's running statistics. A buffer never requires grad (a tensor that does is
  /// detached first), is not in parameters(), is converted by to() when floating, and is in the
  /// state_dict (saved and loaded) only when `persistent`. Returns the registered handle. Names are
  /// unique among the module's parameters, buffers and children and contain no '.'.
  Tensor register_buffer(const std::string& name, Tensor tensor, bool persistent = true);

  /// Parameters with hierarchical names ("encoder.rnn.weight_ih_l0"), own parameters first, then
  /// each child's in registration order: the parameter keys of PyTorch's state_dict. A tensor
  /// registered under several names (a submodule registered twice, tied weights) is listed once,
  /// under its first name, as PyTorch's named_parameters; state_dict() keeps every name.
  NamedTensors named_parameters(bool recurse = true) const;
  /// The tensors of named_parameters(), same order.
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// Buffers (persistent or not) with hierarchical names, in the order of named_parameters(); a
  /// tensor registered under several names once, as PyTorch's named_buffers.
  NamedTensors named_buffers(bool recurse = true) const;
  /// The tensors of named_buffers(), same order.
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// This module ("") and every descendant with its qualified name, depth first; a module reachable
  /// under several names is listed once, under its first (as PyTorch's). The pointers are
  /// non-owning and valid while this module lives.
  std::vector<std::pair<std::string, Module*>> named_modules();
  /// The modules of named_modules(), same order (this module first).
  std::vector<Module*> modules();
  /// Direct submodules with their (unqualified) names, in registration order; a module registered
  /// under several names once, under its first (as PyTorch's).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  /// The modules of named_children(), same order.
  std::vector<std::shared_ptr<Module>> children() const;
  /// Calls fn(m) for every submodule m, children before their parent, then fn(*this), as PyTorch's
  /// apply (LibTorch's calls fn on the parent first): `model->apply(init_weights)`. A module
  /// reachable through several parents is visited once per parent, as PyTorch's. Returns *this.
  Module& apply(const std::function<void(Module&)>& fn);
  /// The parameter with qualified name `name`; throws std::out_of_range listing nothing else.
  Tensor parameter(const std::string& name) const;
  /// The buffer with qualified name `name` (torch's get_buffer); throws std::out_of_range.
  Tensor buffer(const std::string& name) const;

  /// Sets training mode here and in every descendant (dropout etc. read is_training()).
  virtual void train(bool on = true);
  /// train(false).
  void eval() { train(false); }
  /// Whether this module is in training mode (the default).
  bool is_training() const { return training_; }

  /// Converts every floating parameter and buffer to `dtype` in place (same handles, same names; a
  /// converted parameter's gradient is dropped), e.g. to gradcheck a model in float64. Returns *this.
  Module& to(DType dtype);
  /// Drops the accumulated gradient of every parameter: zero_grad(set_to_none=True), PyTorch 2.0's
  /// default (1.13's zeroes them in place); dropping saves a pass over every gradient and its
  /// memory between steps, and an absent gradient reads as undefined, not as zeros.
  void zero_grad();
  /// Total number of elements over all parameters (only trainable ones if `trainable_only`).
  std::int64_t num_parameters(bool trainable_only = false) const;

  /// The parameters and persistent buffers as a state dict (handles, not copies), as PyTorch's: per
  /// module its parameters, then its persistent buffers, then each child's; every name, a tensor
  /// registered under several names once under each.
  NamedTensors state_dict() const;
  /// Copies `entries` into the parameters and persistent buffers (converted to each one's dtype).
  /// Checks every name and shape first and throws one std::runtime_error, prefixed by `source`,
  /// listing all missing, unexpected, duplicated and shape-mismatched entries; nothing is modified
  /// unless every check passes.
  void load_state_dict(const NamedTensors& entries, const std::string& source = "load_state_dict");
  /// Writes state_dict() to a NumPy .npz file (float32 for floating tensors; see serialize.h).
  void save(const std::string& path) const;
  /// Reads a .npz checkpoint (written by save() or by np.savez of a PyTorch state_dict).
  void load(const std::string& path);

  /// Tree printout like PyTorch's repr: "Seq2Seq(\n  (encoder): Encoder(\n ...)\n)".
  std::string str() const;

  /// Registers `hook`, run before forward each time this module is called (torch's
  /// register_forward_pre_hook); hooks run in registration order, each seeing the previous one's
  /// inputs. Not inherited by submodules.
  ModuleHookHandle register_forward_pre_hook(ForwardPreHook hook);
  /// Registers `hook`, run after forward each time this module is called (torch's
  /// register_forward_hook); hooks run in registration order, each seeing the previous one's output.
  ModuleHookHandle register_forward_hook(ForwardHook hook);
  bool has_forward_hooks() const;

  /// forward(x) between this module's forward hooks (just forward(x) when it has none): what a
  /// module's operator() calls.
  template <class F> Tensor with_forward_hooks(const Tensor& x, F&& forward) const {
    if (!has_forward_hooks()) return forward(x);
    return run_forward_hooks({x}, [&](const std::vector<Tensor>& in) -> Tensor { return forward(in[0]); });
  }
  /// The same for a forward of several tensors, given and received as a vector.
  template <class F> Tensor with_forward_hooks(std::vector<Tensor> inputs, F&& forward) const {
    if (!has_forward_hooks()) return forward(inputs);
    return run_forward_hooks(std::move(inputs), [&](const std::vector<Tensor>& in) -> Tensor { return forward(in); });
  }

 protected:
  /// Puts `module` in place of the existing child `name`, keeping its position (ModuleDict's
  /// md[key] = m on an existing key). Throws std::invalid_argument if there is no such child.
  void replace_module(const std::string& name, std::shared_ptr<Module> module);
  /// Every child entry in registration order, a module registered under several names under each
  /// (ModuleDict counts its keys with it).
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& child_entries() const { return children_; }

 private:
  struct Buffer {
    std::string name;
    Tensor tensor;
    bool persistent;
  };
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name, const char* what) const;
  void collect_parameters(const std::string& prefix, bool recurse, NamedTensors& out) const;
  /// Buffers with qualified names; only persistent ones unless `all`.
  void collect_buffers(const std::string& prefix, bool recurse, bool all, NamedTensors& out) const;
  void collect_state(const std::string& prefix, NamedTensors& out) const;

  Tensor run_forward_hooks(std::vector<Tensor> inputs, const std::function<Tensor(const std::vector<Tensor>&)>& forward) const;

  NamedTensors params_;
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::shared_ptr<ForwardHookRegistry> hooks_;  // null until a hook is registered
};

/// RAII: puts a module in eval mode for its lifetime and restores its previous mode after
/// (decoding and evaluation inside a training loop).
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Module& m) : module_(m), was_training_(m.is_training()) { module_.eval(); }
  /// The same for the module a holder holds.
  template <class M>
  explicit EvalModeGuard(const ModuleHolder<M>& m) : EvalModeGuard(static_cast<Module&>(*m)) {}
  ~EvalModeGuard() { module_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

/// Writes module.str().
std::ostream& operator<<(std::ostream& os, const Module& module);

/// Writes the held module's str().
template <class M>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<M>& module) {
  return os << static_cast<const Module&>(*module);
}

}  // namespace tg::nn
