#pragma once
// Module containers as torch.nn.Sequential, torch.nn.ModuleList and torch.nn.ModuleDict.
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
// no forward; typed access to a member is get<M>(i) / get<M>(key).
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

/// `m` as an M (the typed get<M>() of the containers); throws std::invalid_argument naming the
/// container, the member's key and its actual type.
template <class M>
std::shared_ptr<M> member_as(const std::shared_ptr<Module>& m, const char* container, const std::string& key) {
  auto typed = std::dynamic_pointer_cast<M>(m);
  if (!typed) throw std::invalid_argument(std::string(container) + ": member '" + key + "' is a " + m->name());
  return typed;
}

/// torch.nn.Sequential: forward(x) applies the members in order. Members are children "0", "1", ...
class Sequential : public Module {
 public:
  Sequential() = default;
  /// Sequential(std::make_shared<Linear>(...), std::make_shared<ReLU>(), ...).
  template <UnaryModule... Ms>
  explicit Sequential(std::shared_ptr<Ms>... modules) {
    (push_back(std::move(modules)), ...);
  }

  /// Appends `module` as child str(size()); returns it with its own type.
  template <UnaryModule M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    register_module(std::to_string(members_.size()), module);  // throws for null
    members_.push_back(module);
    M* raw = module.get();  // owned by members_/children for the container's lifetime
    // As PyTorch's Sequential calls module(x): each member's forward hooks run.
    forwards_.emplace_back([raw](const Tensor& x) -> Tensor {
      return raw->with_forward_hooks(x, [raw](const Tensor& v) -> Tensor { return raw->forward(v); });
    });
    return module;
  }
  /// Same as push_back (PyTorch's append).
  template <UnaryModule M>
  std::shared_ptr<M> append(std::shared_ptr<M> module) {
    return push_back(std::move(module));
  }

  /// The members' forwards in order; the identity when empty (as PyTorch).
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }

  std::size_t size() const { return members_.size(); }
  bool empty() const { return members_.empty(); }
  /// Member `i`; negative `i` counts from the end. Throws std::out_of_range.
  std::shared_ptr<Module> operator[](std::int64_t i) const;
  /// Member `i` as an M; throws std::invalid_argument if it is not one.
  template <class M>
  std::shared_ptr<M> get(std::int64_t i) const {
    return member_as<M>((*this)[i], "Sequential", std::to_string(i));
  }
  auto begin() const { return members_.begin(); }
  auto end() const { return members_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> members_;
  std::vector<std::function<Tensor(const Tensor&)>> forwards_;
};

/// torch.nn.ModuleList: a list of modules of any type, children "0", "1", ...; no forward.
class ModuleList : public Module {
 public:
  ModuleList() = default;
  explicit ModuleList(std::vector<std::shared_ptr<Module>> modules);

  /// Appends `module` as child str(size()); returns it with its own type.
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    register_module(std::to_string(members_.size()), module);  // checks M and null
    members_.push_back(module);
    return module;
  }
  /// Same as push_back (PyTorch's append).
  template <class M>
  std::shared_ptr<M> append(std::shared_ptr<M> module) {
    return push_back(std::move(module));
  }

  std::size_t size() const { return members_.size(); }
  bool empty() const { return members_.empty(); }
  /// Member `i`; negative `i` counts from the end. Throws std::out_of_range.
  std::shared_ptr<Module> operator[](std::int64_t i) const;
  /// Member `i` as an M; throws std::invalid_argument if it is not one.
  template <class M>
  std::shared_ptr<M> get(std::int64_t i) const {
    return member_as<M>((*this)[i], "ModuleList", std::to_string(i));
  }
  auto begin() const { return members_.begin(); }
  auto end() const { return members_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> members_;
};

/// torch.nn.ModuleDict: modules by name, in insertion order; no forward. Keys follow the rules of
/// register_module (non-empty, no '.').
class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  explicit ModuleDict(std::vector<std::pair<std::string, std::shared_ptr<Module>>> items);

  /// Adds `module` under `key` (md[key] = module): a new key goes last, an existing key keeps its
  /// place and gets the new module, as PyTorch. Returns it with its own type.
  template <class M>
  std::shared_ptr<M> insert(const std::string& key, std::shared_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "ModuleDict::insert: M must derive from tg::nn::Module");
    set(key, module);
    return module;
  }

  std::size_t size() const { return named_children().size(); }
  bool empty() const { return size() == 0; }
  bool contains(const std::string& key) const;
  /// The member under `key`; throws std::out_of_range listing the keys.
  std::shared_ptr<Module> operator[](const std::string& key) const;
  /// The member under `key` as an M; throws std::invalid_argument if it is not one.
  template <class M>
  std::shared_ptr<M> get(const std::string& key) const {
    return member_as<M>((*this)[key], "ModuleDict", key);
  }
  /// Keys in insertion order.
  std::vector<std::string> keys() const;
  /// (key, module) in insertion order.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> items() const { return named_children(); }

 private:
  void set(const std::string& key, std::shared_ptr<Module> module);
};

}  // namespace tg::nn
