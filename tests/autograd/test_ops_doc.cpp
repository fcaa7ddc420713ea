// docs/ops.md against the code: every public op declared in autograd/ops_*.h and creation.h has
// exactly one row, under its header; the dtypes and gradient columns are probed by calling the op;
// the second-order column is checked against what backward can record today.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/creation.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "autograd/tape.h"

using namespace tg;
namespace fs = std::filesystem;

namespace {

struct Row {
  std::string header, dtypes, gradient, second_order, kind;
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

/// op name -> the headers declaring it.
std::map<std::string, std::set<std::string>> declared_ops() {
  std::map<std::string, std::set<std::string>> out;
  const std::regex decl(R"(^(?:Tensor|std::tuple<Tensor, Tensor>|PooledVector<Tensor>) (operator[^ (]+|[a-z_0-9]+)\()");
  for (const auto& entry : fs::directory_iterator(fs::path(TG_SOURCE_DIR) / "autograd")) {
    const std::string file = entry.path().filename().string();
    if (!(file.rfind("ops_", 0) == 0 && entry.path().extension() == ".h") && file != "creation.h") continue;
    std::ifstream in(entry.path());
    std::smatch m;
    for (std::string line; std::getline(in, line);)
      if (std::regex_search(line, m, decl)) out[m[1].str()].insert(file);
  }
  return out;
}

std::map<std::string, Row> doc_rows(std::vector<std::string>& duplicates) {
  std::map<std::string, Row> out;
  std::ifstream in(fs::path(TG_SOURCE_DIR) / "docs" / "ops.md");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1));
    for (std::string cell; std::getline(ss, cell, '|');) cells.push_back(trim(cell));
    if (cells.size() < 6) {
      duplicates.push_back("malformed row: " + line);
      continue;
    }
    const std::string name = cells[0].substr(1, cells[0].size() - 2);  // strip the backticks
    if (out.count(name)) duplicates.push_back(name);
    out[name] = {cells[1], cells[2], cells[3], cells[4], cells[5]};
  }
  return out;
}

using Probe = std::function<Tensor(const Tensor&)>;

/// Ops called with one tensor argument x (2 x 3, positive values): the first output (values).
std::map<std::string, Probe> probes() {
  static Generator gen(0);
  const Tensor idx = Tensor::from_vector(std::vector<std::int64_t>{0, 1}, {2});
  const Tensor idx2 = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 0, 1, 0, 1}, {2, 3});
  const Tensor lens = Tensor::from_vector(std::vector<std::int64_t>{2, 3}, {2});
  const Tensor targets = Tensor::from_vector(std::vector<std::int64_t>{0, 2}, {2});
  std::map<std::string, Probe> p = {
      {"add", [](const Tensor& x) { return add(x, x); }},
      {"sub", [](const Tensor& x) { return sub(x, x); }},
      {"mul", [](const Tensor& x) { return mul(x, x); }},
      {"div", [](const Tensor& x) { return div(x, x); }},
      {"rsub", [](const Tensor& x) { return rsub(1.0, x); }},
      {"rdiv", [](const Tensor& x) { return rdiv(1.0, x); }},
      {"pow", [](const Tensor& x) { return pow(x, 2.0); }},
      {"clamp", [](const Tensor& x) { return clamp(x, 0.5, 2.0); }},
      {"clamp_min", [](const Tensor& x) { return clamp_min(x, 0.5); }},
      {"clamp_max", [](const Tensor& x) { return clamp_max(x, 2.0); }},
      {"maximum", [](const Tensor& x) { return maximum(x, x); }},
      {"minimum", [](const Tensor& x) { return minimum(x, x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"softplus", [](const Tensor& x) { return softplus(x); }},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }},
      {"elu", [](const Tensor& x) { return elu(x); }},
      {"operator+", [](const Tensor& x) { return x + x; }},
      {"operator-", [](const Tensor& x) { return x - x; }},
      {"operator*", [](const Tensor& x) { return x * x; }},
      {"operator/", [](const Tensor& x) { return x / x; }},
      {"index_select", [idx](const Tensor& x) { return index_select(x, 0, idx); }},
      {"gather", [idx2](const Tensor& x) { return gather(x, 1, idx2); }},
      {"scatter_add", [idx2](const Tensor& x) { return scatter_add(x, 1, idx2, x); }},
      {"index_add", [idx](const Tensor& x) { return index_add(x, 0, idx, x); }},
      {"take_along_dim", [idx2](const Tensor& x) { return take_along_dim(x, idx2, 1); }},
      {"embedding", [idx](const Tensor& x) { return embedding(x, idx); }},
      {"where", [idx2](const Tensor& x) { return where(idx2, x, x); }},
      {"masked_fill", [idx2](const Tensor& x) { return masked_fill(x, idx2, 0.0); }},
      {"dropout", [](const Tensor& x) { return dropout(x, 0.5, gen); }},
      {"matmul", [](const Tensor& x) { return matmul(x, transpose(x, 0, 1)); }},
      {"linear", [](const Tensor& x) { return linear(x, x); }},
      {"sum", [](const Tensor& x) { return sum(x); }},
      {"mean", [](const Tensor& x) { return mean(x); }},
      {"max", [](const Tensor& x) { return std::get<0>(max(x, 1)); }},
      {"min", [](const Tensor& x) { return std::get<0>(min(x, 1)); }},
      {"amax", [](const Tensor& x) { return amax(x); }},
      {"amin", [](const Tensor& x) { return amin(x); }},
      {"argmax", [](const Tensor& x) { return argmax(x, 1); }},
      {"argmin", [](const Tensor& x) { return argmin(x, 1); }},
      {"var", [](const Tensor& x) { return var(x); }},
      {"std", [](const Tensor& x) { return tg::std(x); }},
      {"logsumexp", [](const Tensor& x) { return logsumexp(x, {1}); }},
      {"prod", [](const Tensor& x) { return prod(x); }},
      {"norm", [](const Tensor& x) { return norm(x); }},
      {"cumsum", [](const Tensor& x) { return cumsum(x, 1); }},
      {"cumprod", [](const Tensor& x) { return cumprod(x, 1); }},
      {"topk", [](const Tensor& x) { return std::get<0>(topk(x, 2, 1)); }},
      {"sort", [](const Tensor& x) { return std::get<0>(sort(x, 1)); }},
      {"argsort", [](const Tensor& x) { return argsort(x, 1); }},
      {"reshape", [](const Tensor& x) { return reshape(x, {3, 2}); }},
      {"view", [](const Tensor& x) { return view(x, {3, 2}); }},
      {"flatten", [](const Tensor& x) { return flatten(x); }},
      {"transpose", [](const Tensor& x) { return transpose(x, 0, 1); }},
      {"permute", [](const Tensor& x) { return permute(x, {1, 0}); }},
      {"unsqueeze", [](const Tensor& x) { return unsqueeze(x, 0); }},
      {"squeeze", [](const Tensor& x) { return squeeze(unsqueeze(x, 0)); }},
      {"concat", [](const Tensor& x) { return concat({x, x}); }},
      {"stack", [](const Tensor& x) { return stack({x, x}); }},
      {"narrow", [](const Tensor& x) { return narrow(x, 1, 0, 2); }},
      {"slice", [](const Tensor& x) { return slice(x, 1, 0, 2); }},
      {"split", [](const Tensor& x) { return split(x, 1, 1)[0]; }},
      {"split_with_sizes", [](const Tensor& x) { return split_with_sizes(x, {1, 2}, 1)[1]; }},
      {"chunk", [](const Tensor& x) { return chunk(x, 3, 1)[0]; }},
      {"unbind", [](const Tensor& x) { return unbind(x, 0)[0]; }},
      {"expand", [](const Tensor& x) { return expand(unsqueeze(x, 0), {2, 2, 3}); }},
      {"broadcast_to", [](const Tensor& x) { return broadcast_to(x, {2, 2, 3}); }},
      {"repeat", [](const Tensor& x) { return repeat(x, {2, 1}); }},
      {"flip", [](const Tensor& x) { return flip(x, {1}); }},
      {"roll", [](const Tensor& x) { return roll(x, {1}, {1}); }},
      {"tril", [](const Tensor& x) { return tril(x); }},
      {"triu", [](const Tensor& x) { return triu(x); }},
      {"pad", [](const Tensor& x) { return pad(x, {1, 1}); }},
      {"softmax", [](const Tensor& x) { return softmax(x); }},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x); }},
      {"masked_softmax", [lens](const Tensor& x) { return masked_softmax(x, lens); }},
      {"cross_entropy", [targets](const Tensor& x) { return cross_entropy(x, targets); }},
      {"zeros", [](const Tensor& x) { return zeros(x.shape(), x.dtype()); }},
      {"ones", [](const Tensor& x) { return ones(x.shape(), x.dtype()); }},
      {"full", [](const Tensor& x) { return full(x.shape(), 2.0, x.dtype()); }},
      {"empty", [](const Tensor& x) { return empty(x.shape(), x.dtype()); }},
      {"zeros_like", [](const Tensor& x) { return zeros_like(x); }},
      {"ones_like", [](const Tensor& x) { return ones_like(x); }},
      {"full_like", [](const Tensor& x) { return full_like(x, 2.0); }},
      {"empty_like", [](const Tensor& x) { return empty_like(x); }},
      {"rand_like", [](const Tensor& x) { return rand_like(x, gen); }},
      {"randn_like", [](const Tensor& x) { return randn_like(x, gen); }},
      {"arange", [](const Tensor& x) { return arange(0.0, 4.0, 1.0, x.dtype()); }},
      {"linspace", [](const Tensor& x) { return linspace(0.0, 4.0, 5, x.dtype()); }},
      {"eye", [](const Tensor& x) { return eye(3, -1, x.dtype()); }},
  };
  // The one-argument elementwise functions.
  using Unary = Tensor (*)(const Tensor&);
  const std::vector<std::pair<const char*, Unary>> unary = {
      {"neg", neg},   {"exp", exp},   {"log", log},       {"sqrt", sqrt},   {"tanh", tanh},     {"sigmoid", sigmoid},
      {"relu", relu}, {"square", square}, {"abs", abs},   {"sign", sign},   {"sin", sin},       {"cos", cos},
      {"erf", erf},   {"log1p", log1p}, {"expm1", expm1}, {"rsqrt", rsqrt}, {"reciprocal", reciprocal}, {"silu", silu}};
  for (const auto& [name, fn] : unary) p[name] = [fn](const Tensor& x) { return fn(x); };
  return p;
}

}  // namespace

TEST(OpsDoc, EveryDeclaredOpHasExactlyOneRowUnderItsHeader) {
  const auto declared = declared_ops();
  ASSERT_GT(declared.size(), 80u) << "the declaration parser found too few ops";
  std::vector<std::string> duplicates;
  const auto rows = doc_rows(duplicates);
  EXPECT_TRUE(duplicates.empty()) << "docs/ops.md lists twice: " << ::testing::PrintToString(duplicates);
  for (const auto& [name, headers] : declared) {
    const auto it = rows.find(name);
    if (it == rows.end()) {
      ADD_FAILURE() << "docs/ops.md has no row for `" << name << "` (declared in " << *headers.begin() << ")";
      continue;
    }
    EXPECT_TRUE(headers.count(it->second.header)) << "`" << name << "` is listed under " << it->second.header
                                                   << " but declared in " << *headers.begin();
  }
  for (const auto& [name, row] : rows)
    EXPECT_TRUE(declared.count(name)) << "docs/ops.md lists `" << name << "`, which no autograd header declares";
}

TEST(OpsDoc, ColumnsUseTheDocumentedValues) {
  std::vector<std::string> duplicates;
  for (const auto& [name, row] : doc_rows(duplicates)) {
    EXPECT_TRUE(row.dtypes == "f32, f64" || row.dtypes == "f32, f64, i64") << name << ": " << row.dtypes;
    EXPECT_TRUE(row.gradient == "yes" || row.gradient == "no" || row.gradient == "values") << name << ": " << row.gradient;
    EXPECT_TRUE(row.second_order == "yes" || row.second_order == "no") << name << ": " << row.second_order;
    const std::set<std::string> kinds = {"primitive", "fused", "composed", "alias", "creation"};
    EXPECT_TRUE(kinds.count(row.kind)) << name << ": " << row.kind;
  }
}

TEST(OpsDoc, DtypesAndGradientColumnsMatchWhatTheOpsDo) {
  std::vector<std::string> duplicates;
  const auto rows = doc_rows(duplicates);
  const auto all = probes();
  std::size_t probed = 0;
  for (const auto& [name, probe] : all) {
    const auto it = rows.find(name);
    if (it == rows.end()) {
      ADD_FAILURE() << "probe for `" << name << "`, which docs/ops.md does not list";
      continue;
    }
    const Row& row = it->second;
    ++probed;
    // dtypes: f32 and f64 always; i64 exactly when the row says so.
    for (DType dt : {DType::f32, DType::f64})
      EXPECT_NO_THROW(probe(Tensor::from_values({1, 2, 3, 4, 5, 6}, {2, 3}, dt))) << name << " " << dtype_name(dt);
    bool i64_ok = true;
    try {
      probe(Tensor::from_vector(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}, {2, 3}));
    } catch (const std::exception&) {
      i64_ok = false;
    }
    EXPECT_EQ(i64_ok, row.dtypes == "f32, f64, i64") << "`" << name << "`: docs/ops.md says " << row.dtypes;
    // gradient: whether the (values) output of a float64 input requiring grad requires grad.
    const Tensor x = Tensor::from_values({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64).requires_grad_();
    const bool differentiable = probe(x).requires_grad();
    EXPECT_EQ(differentiable, row.gradient != "no") << "`" << name << "`: docs/ops.md says gradient " << row.gradient;
    tape::reset();
  }
  // The ops not probed here take arguments the generic probe cannot build (attention, GRU cell).
  EXPECT_GE(probed, rows.size() - 4) << "most ops should be probed";
}

TEST(OpsDoc, SecondOrderColumnMatchesTheEngine) {
  Tensor x = Tensor::from_values({0.5, -1.0}, {2}, DType::f64).requires_grad_();
  const Tensor g = tg::grad({sum(tanh(x))}, {x})[0];
  ASSERT_FALSE(g.requires_grad()) << "backward records a graph now: make docs/ops.md's second-order column per op "
                                    "and probe it here";
  std::vector<std::string> duplicates;
  for (const auto& [name, row] : doc_rows(duplicates))
    EXPECT_EQ(row.second_order, "no") << "`" << name << "`: backward records no graph, so no op has a second derivative";
}
