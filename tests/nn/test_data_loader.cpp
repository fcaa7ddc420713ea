// nn/data.h: TensorDataset, default and custom collate, DataLoader order, drop_last, shuffling by
// seed and epoch, background loading (same batches as foreground), edge sizes and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "../autograd/error_of.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_sampling.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "nn/data.h"

namespace {

using tg::DType;
using tg::Tensor;
using tg::nn::data::DataLoader;
using tg::nn::data::DataLoaderOptions;
using tg::nn::data::Example;
using tg::nn::data::TensorDataset;
using tg::testing::error_of;

/// n examples: data row i = (i, 10 i), target i (i64).
TensorDataset counting(std::int64_t n) {
  std::vector<double> d;
  std::vector<std::int64_t> t;
  for (std::int64_t i = 0; i < n; ++i) {
    d.push_back(static_cast<double>(i));
    d.push_back(static_cast<double>(10 * i));
    t.push_back(i);
  }
  return TensorDataset(Tensor::from_values(d, {n, 2}, DType::f32), Tensor::from_vector(t, {n}));
}

/// Targets of every batch of one epoch.
template <class Loader> std::vector<std::vector<std::int64_t>> epoch_targets(Loader& loader) {
  std::vector<std::vector<std::int64_t>> out;
  for (auto& batch : loader) out.push_back(batch.target.template to_vector<std::int64_t>());
  return out;
}

/// Examples computed from their index with ops and a per-index generator: deterministic, some work.
class NoisyDataset : public tg::nn::data::Dataset<Example> {
 public:
  explicit NoisyDataset(std::size_t n, int throw_at = -1) : n_(n), throw_at_(throw_at) {}
  std::size_t size() const override { return n_; }
  Example get(std::size_t i) const override {
    ++calls;
    if (static_cast<int>(i) == throw_at_) throw std::runtime_error("bad example " + std::to_string(i));
    tg::Generator gen(1000 + i);
    const Tensor x = tg::tanh(Tensor::normal({3, 4}, 0, 1, gen));
    return Example{x, Tensor::scalar(static_cast<double>(i), DType::i64)};
  }
  mutable std::atomic<int> calls{0};

 private:
  std::size_t n_;
  int throw_at_;
};

}  // namespace

TEST(DataLoader, TensorDatasetRowsAndErrors) {
  const TensorDataset ds = counting(4);
  EXPECT_EQ(ds.size(), 4u);
  const Example e = ds.get(2);
  EXPECT_EQ(e.data.shape(), (tg::Shape{2}));
  EXPECT_EQ(e.data.to_vector<float>(), (std::vector<float>{2, 20}));
  EXPECT_EQ(e.target.shape(), (tg::Shape{}));
  EXPECT_EQ(e.target.item(), 2.0);
  EXPECT_THROW(ds.get(4), std::out_of_range);
  EXPECT_EQ(error_of([] { TensorDataset(Tensor::zeros({3, 2}), Tensor::zeros({4})); }),
            "TensorDataset: size mismatch between tensors: data [3, 2], target [4]");
  EXPECT_THROW(TensorDataset(Tensor::scalar(1.0)), std::invalid_argument);
}

TEST(DataLoader, BatchesInOrderWithTheLastOneShort) {
  DataLoader loader(counting(10), DataLoaderOptions().batch_size(4));
  EXPECT_EQ(loader.size(), 3u);
  std::vector<tg::Shape> shapes;
  for (auto& batch : loader) shapes.push_back(batch.data.shape());
  EXPECT_EQ(shapes, (std::vector<tg::Shape>{{4, 2}, {4, 2}, {2, 2}}));
  EXPECT_EQ(epoch_targets(loader),
            (std::vector<std::vector<std::int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  // The data travels with its target (default collate stacks both).
  for (auto& batch : loader) {
    const auto d = batch.data.to_vector<float>();
    const auto t = batch.target.to_vector<std::int64_t>();
    for (std::size_t r = 0; r < t.size(); ++r) EXPECT_EQ(d[2 * r + 1], 10.0f * static_cast<float>(t[r]));
  }
}

TEST(DataLoader, DropLast) {
  DataLoader loader(counting(10), DataLoaderOptions().batch_size(4).drop_last(true));
  EXPECT_EQ(loader.size(), 2u);
  EXPECT_EQ(epoch_targets(loader), (std::vector<std::vector<std::int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
}

TEST(DataLoader, ShuffleIsAFunctionOfSeedAndEpoch) {
  const auto opts = DataLoaderOptions().batch_size(3).shuffle(true).seed(7);
  DataLoader a(counting(10), opts), b(counting(10), opts), c(counting(10), DataLoaderOptions(opts).seed(8));
  const auto a0 = epoch_targets(a), a1 = epoch_targets(a);
  EXPECT_EQ(a.epoch(), 2);
  EXPECT_EQ(epoch_targets(b), a0);
  EXPECT_EQ(epoch_targets(b), a1);
  EXPECT_NE(a0, a1);                  // a new permutation each epoch
  EXPECT_NE(epoch_targets(c), a0);    // another seed, another order
  // Each epoch is a permutation: every example once.
  for (const auto& epoch : {a0, a1}) {
    std::vector<std::int64_t> all;
    for (const auto& batch : epoch) all.insert(all.end(), batch.begin(), batch.end());
    std::sort(all.begin(), all.end());
    std::vector<std::int64_t> want(10);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(all, want);
  }
  // set_epoch: epoch 1 without iterating epoch 0; the order is the documented randperm.
  DataLoader d(counting(10), opts);
  d.set_epoch(1);
  EXPECT_EQ(epoch_targets(d), a1);
  tg::Generator gen(tg::SplitMix64::at(7, 1));
  const auto perm = tg::randperm(10, gen).to_vector<std::int64_t>();
  EXPECT_EQ(a1[0], (std::vector<std::int64_t>{perm[0], perm[1], perm[2]}));
}

TEST(DataLoader, CustomCollateAndExampleTypes) {
  // A collate of the caller's own: the sum of the targets in the batch.
  DataLoader<TensorDataset, std::int64_t> sums(counting(7), DataLoaderOptions().batch_size(3),
                                               [](std::vector<Example> examples) {
                                                 std::int64_t s = 0;
                                                 for (const Example& e : examples) s += static_cast<std::int64_t>(e.target.item());
                                                 return s;
                                               });
  std::vector<std::int64_t> got;
  for (std::int64_t s : sums) got.push_back(s);
  EXPECT_EQ(got, (std::vector<std::int64_t>{0 + 1 + 2, 3 + 4 + 5, 6}));

  // Tensor examples collate by stacking; a type with no default collate needs one.
  struct Squares : tg::nn::data::Dataset<Tensor> {
    std::size_t size() const override { return 5; }
    Tensor get(std::size_t i) const override { return Tensor::scalar(static_cast<double>(i * i)); }
  };
  DataLoader squares(Squares{}, DataLoaderOptions().batch_size(2));
  std::vector<std::vector<float>> batches;
  for (const Tensor& t : squares) batches.push_back(t.to_vector<float>());
  EXPECT_EQ(batches, (std::vector<std::vector<float>>{{0, 1}, {4, 9}, {16}}));
  struct Words : tg::nn::data::Dataset<std::string> {
    std::size_t size() const override { return 3; }
    std::string get(std::size_t i) const override { return std::string(i + 1, 'a'); }
  };
  EXPECT_THROW(DataLoader<Words>(Words{}), std::invalid_argument);
  DataLoader<Words, std::string> joined(Words{}, DataLoaderOptions().batch_size(2), [](std::vector<std::string> w) {
    std::string s;
    for (const auto& x : w) s += x + "|";
    return s;
  });
  std::vector<std::string> js;
  for (const auto& s : joined) js.push_back(s);
  EXPECT_EQ(js, (std::vector<std::string>{"a|aa|", "aaa|"}));
}

TEST(DataLoader, BackgroundLoadingGivesTheForegroundBatches) {
  auto ds = std::make_shared<const NoisyDataset>(23);
  auto run = [&](int workers) {
    DataLoader<NoisyDataset> loader(ds, DataLoaderOptions().batch_size(4).shuffle(true).seed(3).num_workers(workers));
    std::vector<std::vector<float>> data;
    std::vector<std::vector<std::int64_t>> targets;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (auto& batch : loader) {
        data.push_back(batch.data.to_vector<float>());
        targets.push_back(batch.target.to_vector<std::int64_t>());
      }
    return std::pair{data, targets};
  };
  const auto foreground = run(0);
  ASSERT_EQ(foreground.second.size(), 12u);  // 6 batches per epoch
  EXPECT_EQ(run(1), foreground);
  EXPECT_EQ(run(3), foreground);
  // With tapegrad on one thread TBB has no worker: the waiting caller runs the loads itself.
  const int before = tg::num_threads();
  tg::set_num_threads(1);
  const auto single = run(2);
  tg::set_num_threads(before);
  EXPECT_EQ(single, foreground);
}

TEST(DataLoader, PrefetchStaysWithinItsWindow) {
  // num_workers 1, prefetch_factor 2: on reaching batch k, batches up to k + 2 are queued, no more.
  NoisyDataset ds(40);
  auto shared = std::shared_ptr<const NoisyDataset>(&ds, [](const NoisyDataset*) {});
  DataLoader<NoisyDataset> loader(shared, DataLoaderOptions().batch_size(2).num_workers(1).prefetch_factor(2));
  int batch = 0;
  for (auto& b : loader) {
    (void)b;
    EXPECT_LE(ds.calls.load(), 2 * (batch + 3)) << "batch " << batch;
    if (++batch == 5) break;  // leaving mid-epoch waits for the loads in flight, then stops
  }
  EXPECT_LE(ds.calls.load(), 2 * (4 + 3));
}

TEST(DataLoader, EmptyDatasetAndBatchLargerThanTheDataset) {
  for (int workers : {0, 2}) {
    SCOPED_TRACE(workers);
    DataLoader empty(TensorDataset(Tensor::zeros({0, 3})), DataLoaderOptions().batch_size(4).num_workers(workers).shuffle(true));
    EXPECT_EQ(empty.size(), 0u);
    int n = 0;
    for (auto& b : empty) (void)b, ++n;
    EXPECT_EQ(n, 0);
    DataLoader big(counting(5), DataLoaderOptions().batch_size(8).num_workers(workers));
    EXPECT_EQ(big.size(), 1u);
    EXPECT_EQ(epoch_targets(big), (std::vector<std::vector<std::int64_t>>{{0, 1, 2, 3, 4}}));
    DataLoader dropped(counting(5), DataLoaderOptions().batch_size(8).drop_last(true).num_workers(workers));
    EXPECT_EQ(dropped.size(), 0u);
    EXPECT_TRUE(epoch_targets(dropped).empty());
  }
}

TEST(DataLoader, ErrorsReachTheCaller) {
  EXPECT_EQ(error_of([] { (void)DataLoader(counting(3), DataLoaderOptions().batch_size(0)); }),
            "DataLoader: batch_size must be >= 1, got 0");
  EXPECT_EQ(error_of([] { (void)DataLoader(counting(3), DataLoaderOptions().num_workers(-1)); }),
            "DataLoader: num_workers must be >= 0, got -1");
  // An example that fails to load: its batch throws, in the foreground and from a worker.
  for (int workers : {0, 2}) {
    SCOPED_TRACE(workers);
    auto ds = std::make_shared<const NoisyDataset>(12, 6);
    DataLoader<NoisyDataset> loader(ds, DataLoaderOptions().batch_size(4).num_workers(workers));
    int seen = 0;
    EXPECT_EQ(error_of<std::runtime_error>([&] {
                for (auto& b : loader) (void)b, ++seen;
              }),
              "bad example 6");
    EXPECT_EQ(seen, 1);
  }
}
