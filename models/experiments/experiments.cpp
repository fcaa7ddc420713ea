// The public pieces of experiments.h every experiment uses: options validation, tables and their
// Markdown/CSV, the list of experiments and run_experiment. Each experiment has its own file
// (length.cpp, ablation.cpp, scores.cpp); what they share is in support.h.
#include "models/experiments/experiments.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "autograd/error_text.h"
#include "models/experiments/support.h"
#include "models/text/tasks.h"

namespace tg::models {

using experiment_support::num;

void ExperimentOptions::validate() const {
  auto fail = [](const std::string& what) { throw std::invalid_argument("experiment options: " + what); };
  if (threads < 0) fail("threads must be >= 0, got " + std::to_string(threads));
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"steps", steps},           {"batch_size", batch_size}, {"embed_size", embed_size},
      {"num_hiddens", num_hiddens}, {"train_pairs", train_pairs}, {"test_pairs", test_pairs},
      {"rounds", rounds},         {"max_len", max_len}};
  for (const auto& [field, v] : sizes)
    if (v < 0) fail(std::string(field) + " must be >= 0 (0 = default), got " + std::to_string(v));
  if (!(lr >= 0) || !std::isfinite(lr)) fail("lr must be a finite number >= 0 (0 = default)");
  for (auto l : max_lens)
    if (l < 1) fail("every maximum length must be >= 1, got " + std::to_string(l));
  if (data_max_len < 1) fail("data_max_len must be >= 1, got " + std::to_string(data_max_len));
  if (!task.empty()) {
    const auto names = task_names();
    if (std::find(names.begin(), names.end(), task) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      fail("unknown task '" + elide(task) + "' (known: " + list + ")");
    }
  }
  if (!data_file.empty() && !std::filesystem::is_regular_file(data_file))
    fail("data file '" + data_file + "' does not exist or is not a file");
}

std::size_t ExperimentTable::column(const std::string& name) const {
  for (std::size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return i;
  throw std::out_of_range("table " + slug + ": no column '" + name + "'");
}

std::string ExperimentTable::markdown() const {
  std::ostringstream os;
  os << '|';
  for (const auto& c : columns) os << ' ' << c << " |";
  os << "\n|";
  for (std::size_t i = 0; i < columns.size(); ++i) os << (i < 2 ? "---|" : "---:|");
  os << '\n';
  for (const auto& row : rows) {
    os << '|';
    for (const auto& cell : row) os << ' ' << cell << " |";
    os << '\n';
  }
  return os.str();
}

std::string ExperimentTable::csv() const {
  auto cell = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  std::ostringstream os;
  for (std::size_t i = 0; i < columns.size(); ++i) os << (i ? "," : "") << cell(columns[i]);
  os << '\n';
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) os << (i ? "," : "") << cell(row[i]);
    os << '\n';
  }
  return os.str();
}

std::string ExperimentResult::markdown() const {
  std::ostringstream os;
  os << "# Experiment " << name << "\n\n";
  for (const auto& t : tables) {
    os << "## " << t.title << "\n\n";
    if (!t.notes.empty()) os << t.notes << "\n\n";
    os << t.markdown() << "\n![" << t.slug << "](" << t.slug << ".svg)\n\n";
  }
  os << "Wall time " << num(seconds, 1) << " s, of which training " << num(train_seconds, 1) << " s.\n";
  return os.str();
}

std::vector<std::string> experiment_names() { return {"ablation", "length", "primes", "scores"}; }

std::vector<std::int64_t> parse_length_list(const std::string& text) {
  std::vector<std::int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 1)
      throw std::invalid_argument("expected a comma-separated list of positive lengths, got '" + elide(text) + "'");
    out.push_back(v);
  }
  if (out.empty())
    throw std::invalid_argument("expected a comma-separated list of positive lengths, got '" + elide(text) + "'");
  return out;
}

ExperimentResult run_experiment(const std::string& name, const ExperimentOptions& options) {
  if (name == "length") return length_experiment(options);
  if (name == "ablation") return ablation_experiment(options);
  if (name == "primes") return primes_experiment(options);
  if (name == "scores") return scores_experiment(options);
  throw std::invalid_argument("unknown experiment '" + elide(name) + "' (known: ablation, length, primes, scores)");
}

}  // namespace tg::models
