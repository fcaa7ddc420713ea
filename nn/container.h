#pragma once
// Module containers as torch.nn.Sequential, torch.nn.ModuleList and torch.nn.ModuleDict, held as
// LibTorch's (nn/module_holder.h): Sequential seq(Linear(4, 8, gen), ReLU()); seq(x).
//
// Containers register their members as ordinary children ("0", "1", ... or the dict keys), so
// hierarchical names come out as PyTorch's: a ModuleList registered as "layers" gives
// "layers.0.weight". Names still contain no '.': a container is one level of the tree.
//
// Typing: the base Module has no forward() (signatures differ between layers), so Sequential only
// accepts modules with a one-tensor forward, checked at compile time by the UnaryModule concept
// (Linear, Dropout, LayerNorm, the activations, a nested Sequential, ...). Each member is stored
// as the child pointer plus a typed std::function calling its forward; GRU or attention, whose
// forward takes or returns more, do not compile into a Sequential. ModuleList and ModuleDict have
// no forward; typed access to a member is get<M>(i) / get<M>(key), with M a holder (get<Linear>,
// which returns a Linear) or a module class (get<LinearImpl>, a std::shared_ptr<LinearImpl>).
//
// Members are given as holders (Linear(...)) or as std::shared_ptrs to modules; each adding
// function returns its argument's type.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg::nn {

/// A module whose forward takes one Tensor and returns one Tensor.
template <class M>
concept UnaryModule = std::derived_from<M, Module> && requires(M& m, const Tensor& x) {
  { m.forward(x) } -> std::convertible_to<Tensor>;
};

namespace holder_detail {
template <class T>
struct module_of_handle {};
template <class M>
struct module_of_handle<std::shared_ptr<M>> {
  using type = M;
};
template <ModuleHolderType H>
struct module_of_handle<H> {
  using type = typename H::ContainedType;
};
}  // namespace holder_detail

/// The module type a handle refers to: M for std::shared_ptr<M>, NameImpl for a holder Name.
template <class T>
using module_of_t = typename holder_detail::module_of_handle<std::remove_cvref_t<T>>::type;

/// A std::shared_ptr to a module or a module holder.
template <class T>
concept ModuleHandle = requires { typename module_of_t<T>; } && std::derived_from<module_of_t<T>, Module>;

/// A handle to a UnaryModule (what a Sequential takes).
template <class T>
concept UnaryModuleHandle = ModuleHandle<T> && UnaryModule<module_of_t<T>>;

/// `m` as an M (the typed get<M>() of the containers): a holder M holding it, or a
/// std::shared_ptr<M>; throws std::invalid_argument naming the container, the member's key and its
/// actual type.
template <class M>
auto member_as(const std::shared_ptr<Module>& m, const char* container, const std::string& key) {
  if constexpr (ModuleHolderType<M>) {
    return M(member_as<typename M::ContainedType>(m, container, key));
  } else {
    auto typed = std::dynamic_pointer_cast<M>(m);
    if (!typed) throw std::invalid_argument(std::string(container) + ": member '" + key + "' is a " + m->name());
    return typed;
  }
}

/// torch.nn.Sequential: forward(x) applies the members in order. Members are children "0", "1", ...
class SequentialImpl : public Module {
 public:
  SequentialImpl() = default;
  /// Sequential(Linear(4, 8, gen), ReLU(), ...): the members in order.
  template <UnaryModuleHandle... Ms>
    requires(sizeof...(Ms) > 0)
  explicit SequentialImpl(Ms&&... modules) {
    (push_back(std::forward<Ms>(modules)), ...);
  }

  /// Appends `module` as child str(size()); returns it.
  template <UnaryModuleHandle H>
  std::remove_cvref_t<H> push_back(H&& module) {
    using M = module_of_t<H>;
    std::shared_ptr<M> ptr = module;
    register_module(std::to_string(members_.size()), ptr);  // throws for null
    members_.push_back(ptr);
    M* raw = ptr.get();  // owned by members_/children for the container's lifetime
    // As PyTorch's Sequential calls module(x): each member's forward hooks run.
    forwards_.emplace_back([raw](const Tensor& x) -> Tensor {
      return raw->with_forward_hooks(x, [raw](const Tensor& v) -> Tensor { return raw->forward(v); });
    });
    return std::forward<H>(module);
  }
  /// Same as push_back (PyTorch's append).
  template <UnaryModuleHandle H>
  std::remove_cvref_t<H> append(H&& module) {
    return push_back(std::forward<H>(module));
  }

  /// The members' forwards in order; the identity when empty (as PyTorch).
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }

  std::size_t size() const { return members_.size(); }
  bool empty() const { return members_.empty(); }
  /// Member `i`; negative `i` counts from the end. Throws std::out_of_range.
  std::shared_ptr<Module> operator[](std::int64_t i) const;
  /// Member `i` as an M (a holder or a module class); throws std::invalid_argument if it is not one.
  template <class M>
  auto get(std::int64_t i) const {
    return member_as<M>((*this)[i], "Sequential", std::to_string(i));
  }
  auto begin() const { return members_.begin(); }
  auto end() const { return members_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> members_;
  std::vector<std::function<Tensor(const Tensor&)>> forwards_;
};
TG_MODULE(Sequential);

/// torch.nn.ModuleList: a list of modules of any type, children "0", "1", ...; no forward.
class ModuleListImpl : public Module {
 public:
  ModuleListImpl() = default;
  /// ModuleList({Linear(4, 8, gen), ReLU()}) (holders convert to std::shared_ptr<Module>).
  explicit ModuleListImpl(std::vector<std::shared_ptr<Module>> modules);

  /// Appends `module` as child str(size()); returns it.
  template <ModuleHandle H>
  std::remove_cvref_t<H> push_back(H&& module) {
    std::shared_ptr<Module> ptr = module;
    register_module(std::to_string(members_.size()), ptr);  // throws for null
    members_.push_back(std::move(ptr));
    return std::forward<H>(module);
  }
  /// Same as push_back (PyTorch's append).
  template <ModuleHandle H>
  std::remove_cvref_t<H> append(H&& module) {
    return push_back(std::forward<H>(module));
  }

  std::size_t size() const { return members_.size(); }
  bool empty() const { return members_.empty(); }
  /// Member `i`; negative `i` counts from the end. Throws std::out_of_range.
  std::shared_ptr<Module> operator[](std::int64_t i) const;
  /// Member `i` as an M (a holder or a module class); throws std::invalid_argument if it is not one.
  template <class M>
  auto get(std::int64_t i) const {
    return member_as<M>((*this)[i], "ModuleList", std::to_string(i));
  }
  auto begin() const { return members_.begin(); }
  auto end() const { return members_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> members_;
};
/// Holder of a ModuleListImpl; also takes the members as a braced list: ModuleList({a, b}).
class ModuleList : public ModuleHolder<ModuleListImpl> {
 public:
  using ModuleHolder<ModuleListImpl>::ModuleHolder;
  using Impl = ModuleListImpl;
  explicit ModuleList(std::vector<std::shared_ptr<Module>> modules)
      : ModuleHolder(std::make_shared<ModuleListImpl>(std::move(modules))) {}
};

/// torch.nn.ModuleDict: modules by name, in insertion order; no forward. Keys follow the rules of
/// register_module (non-empty, no '.').
class ModuleDictImpl : public Module {
 public:
  ModuleDictImpl() = default;
  explicit ModuleDictImpl(std::vector<std::pair<std::string, std::shared_ptr<Module>>> items);

  /// Adds `module` under `key` (md[key] = module): a new key goes last, an existing key keeps its
  /// place and gets the new module, as PyTorch. Returns it.
  template <ModuleHandle H>
  std::remove_cvref_t<H> insert(const std::string& key, H&& module) {
    set(key, std::shared_ptr<Module>(module));
    return std::forward<H>(module);
  }

  /// Entries, a module stored under two keys counted twice (as PyTorch's len()).
  std::size_t size() const { return child_entries().size(); }
  bool empty() const { return size() == 0; }
  bool contains(const std::string& key) const;
  /// The member under `key`; throws std::out_of_range listing the keys.
  std::shared_ptr<Module> operator[](const std::string& key) const;
  /// The member under `key` as an M (a holder or a module class); throws std::invalid_argument if it
  /// is not one.
  template <class M>
  auto get(const std::string& key) const {
    return member_as<M>((*this)[key], "ModuleDict", key);
  }
  /// Keys in insertion order.
  std::vector<std::string> keys() const;
  /// (key, module) in insertion order.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> items() const { return child_entries(); }

 private:
  void set(const std::string& key, std::shared_ptr<Module> module);
};
/// Holder of a ModuleDictImpl; also takes the items as a braced list: ModuleDict({{"a", a}}).
class ModuleDict : public ModuleHolder<ModuleDictImpl> {
 public:
  using ModuleHolder<ModuleDictImpl>::ModuleHolder;
  using Impl = ModuleDictImpl;
  explicit ModuleDict(std::vector<std::pair<std::string, std::shared_ptr<Module>>> items)
      : ModuleHolder(std::make_shared<ModuleDictImpl>(std::move(items))) {}
};

}  // namespace tg::nn
