#include "nn/module.h"

#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <typeinfo>
#include <unordered_set>

#include "autograd/tape.h"
#include "nn/serialize.h"

namespace tg::nn {

struct ForwardHookRegistry {
  std::vector<std::pair<std::uint64_t, ForwardPreHook>> pre;
  std::vector<std::pair<std::uint64_t, ForwardHook>> post;
  std::uint64_t next_id = 1;
};

void ModuleHookHandle::remove() {
  if (auto hooks = hooks_.lock()) {
    std::erase_if(hooks->pre, [&](const auto& e) { return e.first == id_; });
    std::erase_if(hooks->post, [&](const auto& e) { return e.first == id_; });
  }
  hooks_.reset();
}

ModuleHookHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  if (!hook) throw std::invalid_argument("register_forward_pre_hook: empty hook");
  if (!hooks_) hooks_ = std::make_shared<ForwardHookRegistry>();
  const std::uint64_t id = hooks_->next_id++;
  hooks_->pre.emplace_back(id, std::move(hook));
  return ModuleHookHandle(hooks_, id);
}

ModuleHookHandle Module::register_forward_hook(ForwardHook hook) {
  if (!hook) throw std::invalid_argument("register_forward_hook: empty hook");
  if (!hooks_) hooks_ = std::make_shared<ForwardHookRegistry>();
  const std::uint64_t id = hooks_->next_id++;
  hooks_->post.emplace_back(id, std::move(hook));
  return ModuleHookHandle(hooks_, id);
}

bool Module::has_forward_hooks() const { return hooks_ && (!hooks_->pre.empty() || !hooks_->post.empty()); }

Tensor Module::run_forward_hooks(std::vector<Tensor> inputs,
                                 const std::function<Tensor(const std::vector<Tensor>&)>& forward) const {
  // Copies: a hook may register or remove hooks; the change applies from the next call.
  const auto pre = hooks_->pre;
  const auto post = hooks_->post;
  for (const auto& [id, hook] : pre) {
    std::optional<std::vector<Tensor>> replaced = hook(*this, inputs);
    if (!replaced) continue;
    if (replaced->size() != inputs.size())
      throw std::invalid_argument("forward pre-hook of " + name() + ": returned " + std::to_string(replaced->size()) +
                                  " inputs, forward takes " + std::to_string(inputs.size()));
    inputs = std::move(*replaced);
  }
  Tensor output = forward(inputs);
  for (const auto& [id, hook] : post)
    if (std::optional<Tensor> replaced = hook(*this, inputs, output)) output = std::move(*replaced);
  return output;
}

namespace {

/// "tg::nn::LinearImpl" -> "Linear": the demangled name without namespaces (but not inside
/// template arguments) and without a trailing "Impl".
std::string module_type_name(const std::type_info& type) {
  const char* mangled = type.name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string full = (status == 0 && demangled) ? demangled : mangled;
  std::free(demangled);
  const auto angle = full.find('<');
  const auto colon = full.rfind("::", angle);
  std::string name = colon == std::string::npos ? full : full.substr(colon + 2);
  if (name.size() > 4 && name.ends_with("Impl")) name.resize(name.size() - 4);
  return name;
}

}  // namespace

namespace holder_detail {
void throw_empty_module_holder(const std::type_info& contained) {
  const std::string name = module_type_name(contained);
  throw std::logic_error(name + ": the module holder is empty (declared as `" + name +
                         " x{nullptr}` and not assigned a module yet)");
}
}  // namespace holder_detail

std::string Module::name() const { return module_type_name(typeid(*this)); }

void Module::check_new_name(const std::string& name, const char* what) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw std::invalid_argument(std::string(what) + ": invalid name '" + name +
                                "' (must be non-empty and contain no '.')");
  for (const auto& [n, _] : params_)
    if (n == name) throw std::invalid_argument(std::string(what) + ": '" + name + "' is already a parameter");
  for (const auto& b : buffers_)
    if (b.name == name) throw std::invalid_argument(std::string(what) + ": '" + name + "' is already a buffer");
  for (const auto& [n, _] : children_)
    if (n == name) throw std::invalid_argument(std::string(what) + ": '" + name + "' is already a submodule");
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "register_parameter");
  if (!tensor.defined()) throw std::invalid_argument("register_parameter: '" + name + "' is undefined");
  if (!tensor.is_leaf()) tensor = tensor.detach();
  if (requires_grad || tensor.requires_grad()) tensor.requires_grad_(requires_grad);
  params_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor, bool persistent) {
  check_new_name(name, "register_buffer");
  if (!tensor.defined()) throw std::invalid_argument("register_buffer: '" + name + "' is undefined");
  if (!tensor.is_leaf() || tensor.requires_grad()) tensor = tensor.detach();
  buffers_.push_back({name, tensor, persistent});
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "register_module");
  if (!module) throw std::invalid_argument("register_module: '" + name + "' is null");
  if (module.get() == this) throw std::invalid_argument("register_module: a module cannot contain itself");
  children_.emplace_back(name, std::move(module));
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
  if (!module) throw std::invalid_argument("register_module: '" + name + "' is null");
  if (module.get() == this) throw std::invalid_argument("register_module: a module cannot contain itself");
  for (auto& [n, child] : children_)
    if (n == name) {
      child = std::move(module);
      return;
    }
  throw std::invalid_argument("replace_module: '" + name + "' is not a submodule");
}

void Module::collect_parameters(const std::string& prefix, bool recurse, NamedTensors& out) const {
  for (const auto& [n, t] : params_) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (const auto& [n, child] : children_) child->collect_parameters(prefix + n + ".", true, out);
}

void Module::collect_buffers(const std::string& prefix, bool recurse, bool all, NamedTensors& out) const {
  for (const auto& b : buffers_)
    if (all || b.persistent) out.emplace_back(prefix + b.name, b.tensor);
  if (!recurse) return;
  for (const auto& [n, child] : children_) child->collect_buffers(prefix + n + ".", true, all, out);
}

void Module::collect_state(const std::string& prefix, NamedTensors& out) const {
  collect_parameters(prefix, false, out);
  collect_buffers(prefix, false, false, out);
  for (const auto& [n, child] : children_) child->collect_state(prefix + n + ".", out);
}

namespace {
/// `all` without the entries whose tensor came earlier (under another name).
NamedTensors first_names(NamedTensors all) {
  NamedTensors out;
  std::unordered_set<const void*> seen;
  for (auto& entry : all)
    if (!entry.second.defined() || seen.insert(entry.second.impl()).second) out.push_back(std::move(entry));
  return out;
}
}  // namespace

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors all;
  collect_parameters("", recurse, all);
  return first_names(std::move(all));
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors all;
  collect_buffers("", recurse, true, all);
  return first_names(std::move(all));
}

NamedTensors Module::state_dict() const {
  NamedTensors all;
  collect_state("", all);
  return all;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

Tensor Module::parameter(const std::string& name) const {
  NamedTensors all;
  collect_parameters("", true, all);
  for (auto& [n, t] : all)
    if (n == name) return t;
  throw std::out_of_range(this->name() + " has no parameter '" + name + "'");
}

Tensor Module::buffer(const std::string& name) const {
  NamedTensors all;
  collect_buffers("", true, true, all);
  for (auto& [n, t] : all)
    if (n == name) return t;
  throw std::out_of_range(this->name() + " has no buffer '" + name + "'");
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> all{{"", this}};
  for (auto& [n, child] : children_)
    for (auto& [sub, m] : child->named_modules()) all.emplace_back(sub.empty() ? n : n + "." + sub, m);
  std::vector<std::pair<std::string, Module*>> out;
  std::unordered_set<const Module*> seen;
  for (auto& entry : all)
    if (seen.insert(entry.second).second) out.push_back(std::move(entry));
  return out;
}

std::vector<Module*> Module::modules() {
  std::vector<Module*> out;
  for (auto& [_, m] : named_modules()) out.push_back(m);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::unordered_set<const Module*> seen;
  for (const auto& entry : children_)
    if (seen.insert(entry.second.get()).second) out.push_back(entry);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [_, c] : named_children()) out.push_back(c);
  return out;
}

Module& Module::apply(const std::function<void(Module&)>& fn) {
  for (const auto& child : children()) child->apply(fn);
  fn(*this);
  return *this;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, c] : children_) c->train(on);
}

Module& Module::to(DType dtype) {
  if (!is_floating(dtype))
    throw std::invalid_argument("Module::to: parameters must stay floating point, got " +
                                std::string(dtype_name(dtype)));
  NoGradGuard no_grad;
  NamedTensors tensors = named_parameters();
  for (auto& entry : named_buffers()) tensors.push_back(std::move(entry));
  for (auto& [n, t] : tensors) {
    if (!is_floating(t.dtype()) || t.dtype() == dtype) continue;
    // In place: every handle to this tensor (members of the module, an optimizer) sees the new
    // dtype, and the autograd state (requires_grad) is kept.
    t.set_data(t.detach().to(dtype));
  }
  return *this;
}

void Module::zero_grad() {
  for (auto& [_, t] : named_parameters()) t.zero_grad();
}

std::int64_t Module::num_parameters(bool trainable_only) const {
  std::int64_t n = 0;
  for (auto& [_, t] : named_parameters())
    if (!trainable_only || t.requires_grad()) n += t.numel();
  return n;
}


void Module::load_state_dict(const NamedTensors& entries, const std::string& source) {
  const NamedTensors own = state_dict();
  std::map<std::string, const Tensor*> given;
  LoadReport report;  // sections in the order the message lists them
  auto& missing = report.section("missing");
  auto& unexpected = report.section("unexpected");
  auto& mismatched = report.section("shape mismatch");
  auto& duplicated = report.section("duplicated");
  for (const auto& [n, t] : entries)
    if (!given.emplace(n, &t).second) duplicated.push_back(n);
  std::map<std::string, bool> known;
  for (const auto& [n, _] : own) known[n] = true;
  for (const auto& [n, _] : entries)
    if (!known.count(n)) unexpected.push_back(n);

  // Everything is converted into staging tensors before the first parameter is touched.
  std::vector<Tensor> staged;
  for (const auto& [n, p] : own) {
    auto it = given.find(n);
    if (it == given.end()) {
      missing.push_back(n);
      continue;
    }
    const Tensor& src = *it->second;
    if (!(src.shape() == p.shape())) {
      mismatched.push_back(n + ": file " + src.shape().str() + " vs model " + p.shape().str());
      continue;
    }
    staged.push_back(src.detach().to(p.dtype()));
  }
  report.throw_if_any(source);
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < own.size(); ++i) {
    Tensor p = own[i].second;
    p.copy_(staged[i]);
  }
}

void Module::save(const std::string& path) const { save_npz(path, state_dict()); }

void Module::load(const std::string& path) { load_state_dict(load_npz(path), "load " + path); }

std::string Module::str() const {
  std::string s = name() + "(";
  const std::string extra = extra_repr();
  std::vector<std::string> lines;
  if (!extra.empty()) {
    std::istringstream in(extra);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  for (const auto& [n, child] : children_) {
    // Indent the child's continuation lines by two spaces, as PyTorch's _addindent.
    std::string repr = child->str(), indented;
    for (char c : repr) {
      indented += c;
      if (c == '\n') indented += "  ";
    }
    lines.push_back("(" + n + "): " + indented);
  }
  if (lines.size() == 1 && children_.empty()) return s + lines[0] + ")";  // one-line leaf
  if (!lines.empty()) {
    s += "\n";
    for (const auto& l : lines) s += "  " + l + "\n";
  }
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& module) { return os << module.str(); }

}  // namespace tg::nn
