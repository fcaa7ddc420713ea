#include "autograd/error_text.h"

#include <sstream>

namespace tg {

std::string elide(std::string_view text, std::size_t max) {
  if (text.size() <= max) return std::string(text);
  return std::string(text.substr(0, max)) + "... (" + std::to_string(text.size() - max) + " more characters)";
}

std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string join_elided(const std::vector<std::string>& items, std::size_t first) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < first; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > first) out += ", ... (" + std::to_string(items.size() - first) + " more)";
  return out;
}

}  // namespace tg
