// Error messages stay short on their first line however large the input: the first line names the
// op or file (and the shapes or field), at most 200 characters; long parts are elided or follow on
// later lines. Each case feeds a pathological input to one op or loader.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../autograd/error_of.h"
#include "autograd/error_text.h"
#include "autograd/ops_shape.h"
#include "autograd/tensor.h"
#include "models/experiments/experiments.h"
#include "models/text/data.h"
#include "models/text/tasks.h"
#include "models/text/text.h"
#include "models/training/checkpoint.h"
#include "models/translators/options.h"
#include "models/translators/seq2seq.h"
#include "nn/linear.h"
#include "nn/serialize.h"
#include "autograd/random.h"
#include "test_dirs.h"

using namespace tg;
using namespace tg::models;
using tg::testing::error_of;

namespace {

constexpr std::size_t kMaxFirstLine = 200;

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The first line is short and starts with `head` (the op, file or field).
void expect_short(const std::string& what, const std::string& head, const std::string& also = "") {
  const std::string line = first_line(what);
  EXPECT_LE(line.size(), kMaxFirstLine) << line.substr(0, 400);
  EXPECT_EQ(line.rfind(head, 0), 0u) << line.substr(0, 400);
  if (!also.empty()) {
    EXPECT_NE(line.find(also), std::string::npos) << "'" << also << "' not in: " << line.substr(0, 400);
  }
}

std::vector<Tensor> many(std::size_t n, Shape odd_shape, std::size_t odd_at, DType odd_dtype = DType::f32) {
  std::vector<Tensor> xs;
  for (std::size_t i = 0; i < n; ++i)
    xs.push_back(i == odd_at ? Tensor::zeros(odd_shape, odd_dtype) : Tensor::zeros({2, 3}));
  return xs;
}

const std::string kLong(5000, 'x');

}  // namespace

TEST(ErrorMessages, ElideHelpers) {
  EXPECT_EQ(elide("short"), "short");
  EXPECT_EQ(elide("abcdefgh", 3), "abc... (5 more characters)");
  EXPECT_EQ(join_elided({"a", "b"}), "a, b");
  EXPECT_EQ(join_elided({"a", "b", "c", "d"}, 2), "a, b, ... (2 more)");
}

TEST(ErrorMessages, JoiningManyTensorsNamesTheOddOne) {
  std::string e = error_of([] { concat(many(500, {2, 5}, 37), 0); });
  expect_short(e, "concat: ", "tensor 37");
  EXPECT_NE(first_line(e).find("[2, 5]"), std::string::npos) << first_line(e);
  e = error_of([] { concat(many(500, {2, 3}, 401, DType::f64), 1); });
  expect_short(e, "concat: ", "tensor 401");
  e = error_of([] { stack(many(500, {3, 2}, 499), 0); });
  expect_short(e, "stack: ", "tensor 499");
  EXPECT_NE(first_line(e).find("[3, 2]"), std::string::npos) << first_line(e);
  e = error_of([] { stack(many(500, {2, 3}, 3, DType::i64), 0); });
  expect_short(e, "stack: ", "tensor 3");
  // Few tensors: the whole list still fits on the first line.
  e = error_of([] { concat({Tensor::zeros({2, 3}), Tensor::zeros({4, 4})}, 0); });
  EXPECT_EQ(e, "concat: shapes [2, 3], [4, 4] differ outside axis 0");
}

TEST(ErrorMessages, LongIntListsAreElided) {
  const Tensor x = Tensor::zeros({2, 3});
  std::vector<std::int64_t> order(500, 0);
  expect_short(error_of([&] { permute(x, order); }), "permute: ", "wrong length");
  std::vector<std::int64_t> sizes(1000, 1);
  expect_short(error_of([&] { split_with_sizes(x, sizes, 1); }), "split_with_sizes: ");
  EXPECT_EQ(error_of([&] { split_with_sizes(x, {1, 1}, 1); }),
            "split_with_sizes: sizes [1, 1] must be non-negative and sum to 3 (axis 1 of shape [2, 3])");
}

TEST(ErrorMessages, LoadersQuoteLongValuesElided) {
  // config.json: a long unknown option value, a long unknown key, a huge value of the wrong type,
  // a long broken token.
  auto config = [](const std::string& text) { return error_of([&] { config_from_json(text, "ck/config.json"); }); };
  expect_short(config(R"({"readout": ")" + kLong + "\"}"), "ck/config.json: 'readout': unknown value");
  expect_short(config(R"({"model": ")" + kLong + "\"}"), "ck/config.json: 'model': unknown model");
  expect_short(config("{\"" + kLong + "\": 1}"), "ck/config.json: unknown key");
  std::string array = "[";
  for (int i = 0; i < 2000; ++i) array += std::to_string(i) + ",";
  array += "0]";
  expect_short(config(R"({"embed_size": )" + array + "}"), "ck/config.json: 'embed_size' must be an integer");
  expect_short(config(R"({"embed_size": 3)" + kLong + "}"), "ck/config.json: invalid JSON");
  expect_short(error_of([] { parse_option<Readout>(kLong, "--readout"); }), "--readout: unknown value");
  expect_short(error_of([] { ModelKind m(kLong); }), "unknown model");
  expect_short(error_of([] { make_task(kLong, {}); }), "make_task: unknown task");
  expect_short(error_of([] { task_input(kLong, "a"); }), "task_input: unknown task");
  ExperimentOptions o;
  o.task = kLong;
  expect_short(error_of([&] { o.validate(); }), "experiment options: unknown task");
  expect_short(error_of([] { parse_length_list(kLong); }), "expected a comma-separated list");
  expect_short(error_of([] { run_experiment(kLong, ExperimentOptions()); }), "unknown experiment");
  expect_short(error_of([] { tokenize_pairs({{kLong + "\t", "b"}}); }), "tokenize_pairs: ");

  // Vocabulary files whose offending line is long.
  const auto dir = tg::models::testing::per_test_dir("tg_error_messages", true);
  const std::string vocab = (dir / "vocab.txt").string();
  std::ofstream(vocab) << kLong << "\n<pad>\n<bos>\n<eos>\n";
  expect_short(error_of([&] { Vocab::load(vocab); }), vocab + ":1: ");
  std::ofstream(vocab, std::ios::trunc) << "<unk>\n<pad>\n<bos>\n<eos>\n" << kLong << "\n" << kLong << "\n";
  expect_short(error_of([&] { Vocab::load(vocab); }), vocab + ":6: ");
  std::filesystem::remove_all(dir);
}

TEST(ErrorMessages, WeightFilesWithManyProblemsSummariseFirst) {
  Generator gen(0);
  nn::Linear layer(3, 2, gen);
  auto entries = layer->state_dict();
  for (int i = 0; i < 1000; ++i) entries.emplace_back("extra_" + std::to_string(i), Tensor::zeros({1}));
  const std::string e = error_of([&] { layer->load_state_dict(entries, "w.npz"); });
  expect_short(e, "w.npz: ", "1000 unexpected");
  EXPECT_NE(e.find("extra_0"), std::string::npos) << first_line(e);  // the details follow
  EXPECT_LT(e.size(), 1000u) << e.substr(0, 400);

  // A .npy header of 60,000 characters.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'junk" + std::string(60000, 'j') + "': 1}";
  header += std::string(64 - (10 + header.size() + 1) % 64, ' ') + "\n";
  std::string bytes = "\x93NUMPY\x02";
  bytes += '\0';
  const auto n = static_cast<std::uint32_t>(header.size());
  for (int i = 0; i < 4; ++i) bytes += static_cast<char>((n >> (8 * i)) & 0xff);
  bytes += header + std::string(8, '\0');
  expect_short(error_of([&] { nn::npy_decode(bytes, "w.npy"); }), "w.npy: bad .npy header");
}
