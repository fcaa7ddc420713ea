#pragma once
// Module holders as LibTorch's (torch/nn/pimpl.h): a layer class is written as `NameImpl`, and
// TG_MODULE(Name) defines `Name`, a holder of a std::shared_ptr<NameImpl> that is built, copied,
// registered and called like the Python object:
//
//   class BlockImpl : public tg::nn::Module {
//    public:
//     BlockImpl(std::int64_t d, tg::Generator& gen) {
//       fc = register_module("fc", tg::nn::Linear(d, d, gen));
//     }
//     tg::Tensor forward(const tg::Tensor& x) { return tg::relu(fc(x)); }
//     tg::nn::Linear fc{nullptr};  // empty until the constructor registers a layer
//   };
//   TG_MODULE(Block);
//
//   Block block(16, gen);          // std::make_shared<BlockImpl>(16, gen)
//   tg::Tensor y = block(x);       // forward hooks, then BlockImpl::forward(x)
//   block->fc->weight;             // members through ->
//
// A holder has pointer semantics: copies share one module (as Python references do), `*block` is
// the BlockImpl, and a holder converts to std::shared_ptr<BlockImpl> (or to a shared_ptr of a
// base, std::shared_ptr<Module>) wherever one is expected. `Linear fc{nullptr}` is empty; using
// an empty holder throws std::logic_error naming its type. `Block block;` constructs a BlockImpl
// with its default constructor, and does not compile when there is none.
//
// Calling a holder, `block(args...)`, runs:
//   - the module's own operator()(args...) when it has one that takes these arguments (the
//     library's layers of tensors to a tensor: their forward hooks run there);
//   - otherwise, when every argument is a Tensor and forward(args...) returns a Tensor, forward
//     between the module's forward hooks, which see the arguments as given (so a module of your
//     own gets hooks as PyTorch's __call__ gives them);
//   - otherwise forward(args...) (several results, non-tensor arguments: no hooks).
// A braced argument (`layer(x, {})`) cannot pass through the holder's variadic call: name the
// type, or call `layer->forward(x, {})`.
//
// A module whose first constructor argument is an options struct declares `using options_type =
// Options;`; its holder then also takes that argument as a braced list, as in
// `MultiheadAttention({.embed_dim = 8, .num_heads = 2}, gen)`.
#include <concepts>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace tg::nn {

namespace holder_detail {

/// Base of every ModuleHolder, to recognise holders of any module type.
struct ModuleHolderTag {};

/// Throws the std::logic_error of an empty holder of `contained` ("Linear: the module holder is
/// empty ...").
[[noreturn]] void throw_empty_module_holder(const std::type_info& contained);

template <class M>
concept has_options_type = requires { typename M::options_type; };

struct NoOptions {};
template <class M>
struct options_of {
  using type = NoOptions;
};
template <has_options_type M>
struct options_of<M> {
  using type = typename M::options_type;
};
template <class M>
using options_of_t = typename options_of<M>::type;

/// Whether m.forward(args...) takes only tensors (at least one) and returns a Tensor: the calls a
/// holder runs between the module's forward hooks.
template <class M, class... Args>
concept TensorForward = sizeof...(Args) > 0 && (std::is_same_v<std::remove_cvref_t<Args>, Tensor> && ...) &&
                        requires(M& m, Args&&... args) {
                          { m.forward(std::forward<Args>(args)...) } -> std::same_as<Tensor>;
                        };

}  // namespace holder_detail

/// Whether T (cv/ref removed) is a ModuleHolder<M> for some module M, or a class derived from one
/// (what TG_MODULE defines).
template <class T>
concept ModuleHolderType = std::derived_from<std::remove_cvref_t<T>, holder_detail::ModuleHolderTag>;

/// A std::shared_ptr<Contained> with the constructors and the call operator of LibTorch's
/// torch::nn::ModuleHolder; see the file comment.
template <class Contained>
class ModuleHolder : public holder_detail::ModuleHolderTag {
 public:
  using ContainedType = Contained;

  /// A default-constructed Contained. A module without a default constructor has no default
  /// holder: write `Name x{nullptr};` for an empty one.
  ModuleHolder() : impl_(default_construct()) {}
  /// Empty: `Linear fc{nullptr};` or `Linear fc = nullptr;`.
  ModuleHolder(std::nullptr_t) {}  // NOLINT: implicit, as LibTorch's
  /// Holds `module` (may be null: then empty).
  ModuleHolder(std::shared_ptr<Contained> module) : impl_(std::move(module)) {}  // NOLINT: implicit

  /// std::make_shared<Contained>(args...): `Linear(3, 4, gen)`. One argument that already is (or
  /// converts to) a std::shared_ptr<Contained> is held, not passed to a constructor.
  template <class Head, class... Tail>
    requires(!(sizeof...(Tail) == 0 &&
               (std::is_same_v<std::decay_t<Head>, std::nullptr_t> ||
                std::is_base_of_v<ModuleHolder, std::decay_t<Head>> ||
                std::is_convertible_v<Head&&, std::shared_ptr<Contained>>)) &&
             !(holder_detail::has_options_type<Contained> &&
               std::is_same_v<std::decay_t<Head>, holder_detail::options_of_t<Contained>>) &&
             std::is_constructible_v<Contained, Head&&, Tail&&...>)
  explicit ModuleHolder(Head&& head, Tail&&... tail)
      : impl_(std::make_shared<Contained>(std::forward<Head>(head), std::forward<Tail>(tail)...)) {}

  /// std::make_shared<Contained>(options, args...) for a module that declares options_type, so that
  /// the options may be a braced list.
  template <class... Tail>
    requires(holder_detail::has_options_type<Contained> &&
             std::is_constructible_v<Contained, const holder_detail::options_of_t<Contained>&, Tail&&...>)
  explicit ModuleHolder(const holder_detail::options_of_t<Contained>& options, Tail&&... tail)
      : impl_(std::make_shared<Contained>(options, std::forward<Tail>(tail)...)) {}

  Contained* operator->() const { return get(); }
  Contained& operator*() const { return *get(); }
  /// The module; throws std::logic_error when empty.
  Contained* get() const {
    if (!impl_) holder_detail::throw_empty_module_holder(typeid(Contained));
    return impl_.get();
  }
  /// The shared pointer; throws std::logic_error when empty.
  const std::shared_ptr<Contained>& ptr() const {
    if (!impl_) holder_detail::throw_empty_module_holder(typeid(Contained));
    return impl_;
  }
  /// Whether no module is held (`Linear fc{nullptr}` before assignment).
  bool is_empty() const noexcept { return impl_ == nullptr; }
  explicit operator bool() const noexcept { return !is_empty(); }

  /// The held pointer as a std::shared_ptr<T> for Contained or any base T (null when empty), so a
  /// holder goes wherever such a pointer is expected.
  template <class T>
    requires std::is_convertible_v<Contained*, T*>
  operator std::shared_ptr<T>() const {  // NOLINT: implicit, as the brief of a holder
    return impl_;
  }

  /// Calls the module: its operator(), or forward between its forward hooks, or forward (see the
  /// file comment).
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    Contained& m = **this;
    if constexpr (requires(Contained& c) { c(std::declval<Args>()...); }) {
      return m(std::forward<Args>(args)...);
    } else if constexpr (holder_detail::TensorForward<Contained, Args...>) {
      return call_with_hooks(m, args...);
    } else {
      return m.forward(std::forward<Args>(args)...);
    }
  }

  /// The module's operator[] (a container's member).
  template <class Arg>
  decltype(auto) operator[](Arg&& arg) const {
    return (**this)[std::forward<Arg>(arg)];
  }

 private:
  static std::shared_ptr<Contained> default_construct() {
    if constexpr (std::is_default_constructible_v<Contained>) {
      return std::make_shared<Contained>();
    } else {
      static_assert(std::is_default_constructible_v<Contained>,
                    "this module has no default constructor: construct it with its arguments, or declare "
                    "an empty holder with `Name x{nullptr};` and assign it later");
      return nullptr;
    }
  }

  template <class... Ts>
  static Tensor call_with_hooks(Contained& m, const Ts&... args) {
    if (!m.has_forward_hooks()) return m.forward(args...);
    if constexpr (sizeof...(Ts) == 1) {
      return m.with_forward_hooks(args..., [&m](const Tensor& x) -> Tensor { return m.forward(x); });
    } else {
      return m.with_forward_hooks(std::vector<Tensor>{args...}, [&m](const std::vector<Tensor>& in) -> Tensor {
        return [&]<std::size_t... I>(std::index_sequence<I...>) -> Tensor {
          return m.forward(in[I]...);
        }(std::index_sequence_for<Ts...>{});
      });
    }
  }

  std::shared_ptr<Contained> impl_;
};

}  // namespace tg::nn

/// Defines `Name` as a holder of NameImpl (a tg::nn::Module): TG_MODULE(Block) after class
/// BlockImpl, as LibTorch's TORCH_MODULE. `Name::Impl` is NameImpl.
#define TG_MODULE(Name) TG_MODULE_IMPL(Name, Name##Impl)

/// TG_MODULE with the module class named explicitly: TG_MODULE_IMPL(Block, MyBlock).
#define TG_MODULE_IMPL(Name, ImplType)                      \
  class Name : public ::tg::nn::ModuleHolder<ImplType> {    \
   public:                                                  \
    using ::tg::nn::ModuleHolder<ImplType>::ModuleHolder;   \
    using Impl = ImplType;                                  \
  }
