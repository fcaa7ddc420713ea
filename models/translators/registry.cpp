#include "models/translators/registry.h"

#include <ostream>
#include <stdexcept>
#include <string>

#include "autograd/error_text.h"

namespace tg::models {

// Each model file defines its spec.
const ModelSpec& d2l_model_spec();
const ModelSpec& rnnsearch_model_spec();
const ModelSpec& rnnencdec_model_spec();
const ModelSpec& transformer_model_spec();

const std::vector<const ModelSpec*>& model_registry() {
  static const std::vector<const ModelSpec*> specs = {
      &d2l_model_spec(),
      &rnnsearch_model_spec(),
      &rnnencdec_model_spec(),
      &transformer_model_spec(),
  };
  return specs;
}

const ModelSpec& find_model(std::string_view name) {
  for (const ModelSpec* spec : model_registry())
    if (spec->name == name) return *spec;
  std::string names;
  for (const ModelSpec* spec : model_registry()) names += (names.empty() ? "" : ", ") + std::string(spec->name);
  throw std::invalid_argument("unknown model \"" + elide(name) + "\" (registered: " + names + ")");
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const ModelSpec* spec : model_registry()) names.emplace_back(spec->name);
  return names;
}

ModelKind::ModelKind() : spec_(model_registry().front()) {}
ModelKind::ModelKind(std::string_view name) : spec_(&find_model(name)) {}
std::string_view ModelKind::name() const { return spec_->name; }
std::ostream& operator<<(std::ostream& os, const ModelKind& kind) { return os << kind.name(); }

}  // namespace tg::models
