#include "nn/container.h"

#include <stdexcept>

namespace tg::nn {

namespace {
std::size_t checked_index(std::int64_t i, std::size_t size, const char* container) {
  const auto n = static_cast<std::int64_t>(size);
  if (i < -n || i >= n)
    throw std::out_of_range(std::string(container) + ": index " + std::to_string(i) + " is out of range for size " +
                            std::to_string(n));
  return static_cast<std::size_t>(i < 0 ? i + n : i);
}
}  // namespace

Tensor SequentialImpl::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& f : forwards_) y = f(y);
  return y;
}

std::shared_ptr<Module> SequentialImpl::operator[](std::int64_t i) const {
  return members_[checked_index(i, members_.size(), "Sequential")];
}

ModuleListImpl::ModuleListImpl(std::vector<std::shared_ptr<Module>> modules) {
  for (auto& m : modules) push_back(std::move(m));
}

std::shared_ptr<Module> ModuleListImpl::operator[](std::int64_t i) const {
  return members_[checked_index(i, members_.size(), "ModuleList")];
}

ModuleDictImpl::ModuleDictImpl(std::vector<std::pair<std::string, std::shared_ptr<Module>>> items) {
  for (auto& [k, m] : items) set(k, std::move(m));
}

void ModuleDictImpl::set(const std::string& key, std::shared_ptr<Module> module) {
  if (contains(key))
    replace_module(key, std::move(module));
  else
    register_module(key, std::move(module));
}

bool ModuleDictImpl::contains(const std::string& key) const {
  for (const auto& [k, _] : child_entries())
    if (k == key) return true;
  return false;
}

std::shared_ptr<Module> ModuleDictImpl::operator[](const std::string& key) const {
  for (const auto& [k, m] : child_entries())
    if (k == key) return m;
  std::string known;
  for (const auto& k : keys()) known += (known.empty() ? "" : ", ") + k;
  throw std::out_of_range("ModuleDict: no key '" + key + "' (keys: " + known + ")");
}

std::vector<std::string> ModuleDictImpl::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, _] : child_entries()) out.push_back(k);
  return out;
}

}  // namespace tg::nn
