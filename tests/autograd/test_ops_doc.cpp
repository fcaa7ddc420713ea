// docs/ops.md against the code: every public op declared in autograd/ops_*.h and creation.h has
// exactly one row, under its header, and one probe here; the dtypes, gradient and second-order
// columns are checked by calling the op through its probe.
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
      {"index", [](const Tensor& x) { return index(x, {indexing::Slice(), 0}); }},
      {"index_put", [](const Tensor& x) { return index_put(x, {0}, index(x, {1})); }},
      {"masked_select", [](const Tensor& x) { return masked_select(x, Tensor::from_values({1, 0, 1}, {3}, DType::b8)); }},
      {"select", [](const Tensor& x) { return select(x, 1, -1); }},
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
      {"layer_norm", [](const Tensor& x) { return layer_norm(x, {3}, unbind(x, 0)[0], unbind(x, 0)[1]); }},
      {"rms_norm", [](const Tensor& x) { return rms_norm(x, {3}, unbind(x, 0)[0]); }},
      {"layer_norm_composed", [](const Tensor& x) { return layer_norm_composed(x, {3}, unbind(x, 0)[0], unbind(x, 0)[1]); }},
      {"rms_norm_composed", [](const Tensor& x) { return rms_norm_composed(x, {3}, unbind(x, 0)[0]); }},
      {"additive_attention_scores",
       [](const Tensor& x) { return additive_attention_scores(unsqueeze(x, 0), unsqueeze(x, 0), unbind(x, 0)[0]); }},
      {"scaled_dot_product_attention", [](const Tensor& x) { return scaled_dot_product_attention(x, x, x); }},
      {"scaled_dot_product_attention_composed",
       [](const Tensor& x) { return scaled_dot_product_attention_composed(x, x, x); }},
      {"gru_cell_fused", [](const Tensor& x) { return gru_cell_fused(x, x, narrow(x, 1, 0, 1)); }},
      {"eq", [](const Tensor& x) { return eq(x, x); }},
      {"ne", [](const Tensor& x) { return ne(x, 2.0); }},
      {"lt", [](const Tensor& x) { return lt(x, x); }},
      {"le", [](const Tensor& x) { return le(x, 2.0); }},
      {"gt", [](const Tensor& x) { return gt(x, x); }},
      {"ge", [](const Tensor& x) { return ge(x, 2.0); }},
      {"operator==", [](const Tensor& x) { return x == x; }},
      {"operator!=", [](const Tensor& x) { return x != 2.0; }},
      {"operator<", [](const Tensor& x) { return 2.0 < x; }},
      {"operator<=", [](const Tensor& x) { return x <= x; }},
      {"operator>", [](const Tensor& x) { return x > 2.0; }},
      {"operator>=", [](const Tensor& x) { return x >= x; }},
      {"logical_and", [](const Tensor& x) { return logical_and(x, x); }},
      {"logical_or", [](const Tensor& x) { return logical_or(x, x); }},
      {"logical_xor", [](const Tensor& x) { return logical_xor(x, x); }},
      {"logical_not", [](const Tensor& x) { return logical_not(x); }},
      {"isnan", [](const Tensor& x) { return isnan(x); }},
      {"isinf", [](const Tensor& x) { return isinf(x); }},
      {"isfinite", [](const Tensor& x) { return isfinite(x); }},
      {"any", [](const Tensor& x) { return any(x, 1); }},
      {"all", [](const Tensor& x) { return all(x); }},
      {"count_nonzero", [](const Tensor& x) { return count_nonzero(x, {1}); }},
      {"nonzero", [](const Tensor& x) { return nonzero(x); }},
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
      {"conv2d", [](const Tensor& x) { return conv2d(reshape(x, {1, 1, 2, 3}), reshape(x, {1, 1, 2, 3})); }},
      {"conv1d", [](const Tensor& x) { return conv1d(unsqueeze(x, 0), unsqueeze(x, 0)); }},
      {"conv2d_input",
       [](const Tensor& x) { return conv2d_input({1, 1, 2, 3}, reshape(x, {1, 1, 2, 3}), reshape(sum(x), {1, 1, 1, 1})); }},
      {"conv2d_weight",
       [](const Tensor& x) { return conv2d_weight(reshape(x, {1, 1, 2, 3}), {1, 1, 2, 3}, reshape(sum(x), {1, 1, 1, 1})); }},
      {"max_pool2d", [](const Tensor& x) { return max_pool2d(unsqueeze(x, 0), 2); }},
      {"max_pool2d_with_indices", [](const Tensor& x) { return std::get<0>(max_pool2d_with_indices(unsqueeze(x, 0), 2)); }},
      {"max_pool1d", [](const Tensor& x) { return max_pool1d(x, 2); }},
      {"avg_pool2d", [](const Tensor& x) { return avg_pool2d(unsqueeze(x, 0), 2); }},
      {"avg_pool1d", [](const Tensor& x) { return avg_pool1d(x, 2); }},
      {"adaptive_avg_pool2d", [](const Tensor& x) { return adaptive_avg_pool2d(unsqueeze(x, 0), 1); }},
      {"batch_norm", [](const Tensor& x) { return batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true); }},
      {"group_norm", [](const Tensor& x) { return group_norm(x, 1, unbind(x, 0)[0], unbind(x, 0)[1]); }},
      {"multinomial", [](const Tensor& x) { return multinomial(x, 2, false, gen); }},
      {"randint", [](const Tensor& x) { return randint(0, 5, x.shape(), gen, x.dtype()); }},
      {"randperm", [](const Tensor& x) { return randperm(4, gen, x.dtype()); }},
      {"bernoulli", [](const Tensor& x) { return bernoulli(sigmoid(x), gen); }},
      {"normal", [](const Tensor& x) { return normal(x, x, gen); }},
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
  const std::set<std::string> dtypes = {"f32, f64", "f32, f64, i64", "f32, f64, bool", "f32, f64, i64, bool"};
  const std::set<std::string> kinds = {"primitive", "fused", "composed", "alias", "creation"};
  for (const auto& [name, row] : doc_rows(duplicates)) {
    EXPECT_TRUE(dtypes.count(row.dtypes)) << name << ": " << row.dtypes;
    EXPECT_TRUE(row.gradient == "yes" || row.gradient == "no" || row.gradient == "values") << name << ": " << row.gradient;
    // A second derivative exists only where a first one does.
    if (row.gradient == "no")
      EXPECT_EQ(row.second_order, "n/a") << name << ": gradient no, so second order n/a";
    else
      EXPECT_TRUE(row.second_order == "yes" || row.second_order == "no") << name << ": " << row.second_order;
    EXPECT_TRUE(kinds.count(row.kind)) << name << ": " << row.kind;
  }
}

TEST(OpsDoc, EveryRowHasAProbe) {
  std::vector<std::string> duplicates;
  const auto rows = doc_rows(duplicates);
  const auto all = probes();
  for (const auto& [name, row] : rows)
    EXPECT_TRUE(all.count(name)) << "`" << name << "` has no probe in tests/autograd/test_ops_doc.cpp";
  for (const auto& [name, probe] : all)
    EXPECT_TRUE(rows.count(name)) << "probe for `" << name << "`, which docs/ops.md does not list";
}

TEST(OpsDoc, DtypesAndGradientColumnsMatchWhatTheOpsDo) {
  std::vector<std::string> duplicates;
  const auto rows = doc_rows(duplicates);
  for (const auto& [name, probe] : probes()) {
    const auto it = rows.find(name);
    if (it == rows.end()) continue;  // EveryRowHasAProbe reports it
    const Row& row = it->second;
    // dtypes: f32 and f64 always; i64 and bool exactly when the row lists them.
    for (DType dt : {DType::f32, DType::f64})
      EXPECT_NO_THROW(probe(Tensor::from_values({1, 2, 3, 4, 5, 6}, {2, 3}, dt))) << name << " " << dtype_name(dt);
    std::string accepted = "f32, f64";
    for (const auto& [dt, column_name] : {std::pair{DType::i64, "i64"}, std::pair{DType::b8, "bool"}}) {
      try {
        probe(Tensor::from_values({1, 0, 3, 4, 0, 6}, {2, 3}, dt));
        accepted += std::string(", ") + column_name;
      } catch (const std::exception&) {
      }
    }
    EXPECT_EQ(accepted, row.dtypes) << "`" << name << "`: the op accepts " << accepted << ", docs/ops.md says "
                                    << row.dtypes;
    // gradient: whether the (values) output of a float64 input requiring grad requires grad.
    const Tensor x = Tensor::from_values({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64).requires_grad_();
    const bool differentiable = probe(x).requires_grad();
    EXPECT_EQ(differentiable, row.gradient != "no") << "`" << name << "`: docs/ops.md says gradient " << row.gradient;
    tape::reset();
  }
}

namespace {

bool is_not_supported(const std::exception& e) {
  return std::string(e.what()).find("double backward (create_graph) is not supported") != std::string::npos;
}

}  // namespace

// second order: the first gradient g = J^T v of the probe's output, taken with create_graph and a
// v that requires grad (as gradgradcheck perturbs it), so g depends on v when the op's backward was
// recorded, linear ops included (a zero J^T v, as sign's, is a constant); then a second grad of
// sum(g) with respect to x and v. `no`: the not-supported error, nothing else.
TEST(OpsDoc, SecondOrderColumnMatchesWhatTheOpsDo) {
  std::vector<std::string> duplicates;
  const auto rows = doc_rows(duplicates);
  for (const auto& [name, probe] : probes()) {
    const auto it = rows.find(name);
    if (it == rows.end() || it->second.gradient == "no") continue;
    const bool documented = it->second.second_order == "yes";
    const Tensor x = Tensor::from_values({0.5, -1.5, 2.0, 1.25, -0.75, 3.0}, {2, 3}, DType::f64).requires_grad_();
    const Tensor y = probe(x);
    const Tensor v = Tensor::full(y.shape(), 0.5, DType::f64).requires_grad_();
    try {
      const Tensor g = tg::grad({y}, {x}, {v}, {.create_graph = true})[0];
      ASSERT_TRUE(g.defined()) << name;
      if (g.requires_grad()) {
        const auto gg = tg::grad({sum(g)}, {x, v}, {}, {.allow_unused = true});
        EXPECT_TRUE(gg[1].defined()) << "`" << name << "`: the second grad did not reach v";
      } else {
        // g = J^T v is free of v only where J^T v is 0 whatever v (sign): a constant gradient.
        for (double e : g.to_vector<double>())
          EXPECT_EQ(e, 0.0) << "`" << name << "`: with create_graph the first gradient does not depend on v";
      }
      EXPECT_TRUE(documented) << "`" << name << "`: its gradient is differentiable, docs/ops.md says second order no";
    } catch (const std::exception& e) {
      if (!is_not_supported(e)) ADD_FAILURE() << "`" << name << "`: unexpected error: " << e.what();
      EXPECT_FALSE(documented) << "`" << name << "`: docs/ops.md says second order yes, but: " << e.what();
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << "`" << name << "`: thrown by another op: " << e.what();
    }
    tape::reset();
  }
}

