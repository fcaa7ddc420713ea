// tg::dist and nn::DistributedDataParallel, run by ctest as `mpirun -np 2 test_dist` (every rank
// runs every test; each checks its own results and that the ranks agree bit for bit).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/dist.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "nn/distributed.h"

#include "../autograd/error_of.h"

namespace tg {
namespace {

/// The elements' bytes, hashed (FNV-1a): compares tensors across ranks bit for bit.
double bits_hash(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.data_ptr());
  const std::size_t n = static_cast<std::size_t>(t.numel()) * (t.dtype() == DType::f64 ? 8 : 4);
  std::uint64_t h = 1469598103934665603ULL;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return static_cast<double>(h >> 11);  // exact in a double
}
void expect_same_on_every_rank(const Tensor& t, const std::string& what) {
  const std::vector<double> hashes = dist::allgather(bits_hash(t), what);
  for (std::size_t r = 1; r < hashes.size(); ++r) EXPECT_EQ(hashes[r], hashes[0]) << what << ": rank " << r << " differs";
}

TEST(Dist, WorldOfTwo) {
  EXPECT_TRUE(dist::available());
  EXPECT_TRUE(dist::initialized());
  EXPECT_EQ(dist::world_size(), 2) << "run me with mpirun -np 2";
  EXPECT_NE(dist::backend().find("MPI"), std::string::npos) << dist::backend();
}

TEST(Dist, AllreduceSumEqualsTheTreeSumOnEveryRank) {
  // Every rank gets, bit for bit, dist::tree_sum over all ranks' values. At -np 2 the tree is one
  // commutative a + b, so this cannot tell one order of the ranks from another; the shape of a larger
  // tree is checked without MPI by TreeOverFourPartsIsTheTreeOfTwoBlocks.
  const int R = dist::rank(), N = dist::world_size();
  for (DType dt : {DType::f32, DType::f64}) {
    // Values of widely different magnitudes (float32 rounds their sums).
    std::vector<double> mine(1000);
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = std::pow(10.0, (R * 7 + i) % 9) * (i % 3 ? 1 : -1) + 0.1 * R;
    Tensor t = Tensor::from_values(mine, {1000}, dt);
    dist::allreduce_sum(t);
    // The expected value: the same tree over every rank's values, computed here.
    std::vector<Tensor> each;
    for (int r = 0; r < N; ++r) {
      std::vector<double> v(1000);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::pow(10.0, (r * 7 + i) % 9) * (i % 3 ? 1 : -1) + 0.1 * r;
      each.push_back(Tensor::from_values(v, {1000}, dt));
    }
    Tensor want = Tensor::empty({1000}, dt);
    if (dt == DType::f32) {
      std::vector<const float*> parts;
      for (auto& e : each) parts.push_back(e.data<float>());
      dist::tree_sum(parts.data(), parts.size(), 1000, want.data<float>());
    } else {
      std::vector<const double*> parts;
      for (auto& e : each) parts.push_back(e.data<double>());
      dist::tree_sum(parts.data(), parts.size(), 1000, want.data<double>());
    }
    EXPECT_EQ(std::memcmp(t.data_ptr(), want.data_ptr(), 1000 * (dt == DType::f32 ? 4 : 8)), 0);
    expect_same_on_every_rank(t, "allreduce result");
  }
}

TEST(Dist, AllreduceRejectsMismatchAndBadDtype) {
  Tensor i = Tensor::from_vector(std::vector<std::int64_t>{1, 2}, {2});
  try {
    dist::allreduce_sum(i);
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("dist::allreduce_sum: dtype int64"), std::string::npos) << e.what();
  }
  Tensor t = Tensor::zeros({dist::rank() + 1}, DType::f32);  // sizes differ between ranks
  try {
    dist::allreduce_sum(t);
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("dist::allreduce_sum: rank"), std::string::npos) << e.what();
  }
}

TEST(Dist, BroadcastAndBarrier) {
  Tensor t = Tensor::full({3, 2}, 1.5 + dist::rank(), DType::f64);
  dist::broadcast(t, 1);
  EXPECT_EQ(t.to_vector<double>(), std::vector<double>(6, 2.5));
  dist::barrier();
  EXPECT_THROW(dist::broadcast(t, 7), std::invalid_argument);
}

TEST(Dist, TreeOverFourPartsIsTheTreeOfTwoBlocks) {
  // What makes 2 ranks x 2 shards equal 1 rank x 4 shards.
  std::vector<float> a{1e8f, 1.f, -1e8f, 3.f}, b{0.3f, 1e-3f, 7.f, -0.3f}, c{5.f, 1e7f, 1.f, 2.f}, d{-5.f, 1.f, 1e-7f, 9.f};
  const float* four[] = {a.data(), b.data(), c.data(), d.data()};
  std::vector<float> all(4), left(4), right(4), blocks(4);
  dist::tree_sum(four, 4, 4, all.data());
  dist::tree_sum(four, 2, 4, left.data());
  dist::tree_sum(four + 2, 2, 4, right.data());
  const float* two[] = {left.data(), right.data()};
  dist::tree_sum(two, 2, 4, blocks.data());
  EXPECT_EQ(std::memcmp(all.data(), blocks.data(), sizeof(float) * 4), 0);
}

// ---- DistributedDataParallel --------------------------------------------------------------------

/// A small f64 network whose recurrent weight is used `uses` times (as a decoder's per-step
/// weights are), so parameters receive several gradients per backward.
struct Net {
  Tensor w_in, w_rec, w_out, unused;
  explicit Net(std::uint64_t seed) {
    Generator g(seed);
    w_in = Tensor::normal({4, 6}, 0, 0.5, g, DType::f64).requires_grad_();
    w_rec = Tensor::normal({6, 6}, 0, 0.4, g, DType::f64).requires_grad_();
    w_out = Tensor::normal({6, 1}, 0, 0.5, g, DType::f64).requires_grad_();
    unused = Tensor::zeros({2}, DType::f64).requires_grad_();
  }
  nn::NamedTensors params() const { return {{"w_in", w_in}, {"w_rec", w_rec}, {"w_out", w_out}, {"unused", unused}}; }
  /// Sum over rows of the outputs (the caller scales).
  Tensor loss(const Tensor& x, int uses) const {
    Tensor h = tanh(matmul(x, w_in));
    for (int k = 0; k < uses; ++k) h = tanh(matmul(h, w_rec));
    return sum(matmul(h, w_out));
  }
};

Tensor batch_rows(const Tensor& x, std::int64_t r0, std::int64_t r1) { return narrow(x, 0, r0, r1 - r0).clone(); }

TEST(DDP, BroadcastsRankZerosParameters) {
  Net net(100 + static_cast<std::uint64_t>(dist::rank()));  // different on each rank
  Net ref(100);
  nn::DistributedDataParallel ddp(net.params());
  const nn::NamedTensors got = net.params(), want = ref.params();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].first, want[i].first);
    EXPECT_EQ(got[i].second.to_vector<double>(), want[i].second.to_vector<double>()) << got[i].first;
  }
}

TEST(DDP, BucketedGradientsMatchOneProcessOnTheFullBatch) {
  const int R = dist::rank(), N = dist::world_size();
  Generator g(7);
  const Tensor x = Tensor::normal({8, 4}, 0, 1, g, DType::f64);
  for (bool average : {true, false}) {
    Net net(1), ref(1);
    // Tiny buckets: several per step, most started during backward.
    nn::DistributedDataParallel ddp(net.params(), nn::DDPOptions().bucket_bytes(300).average(average));
    EXPECT_GE(ddp.num_buckets(), 3);
    for (int step = 0; step < 3; ++step) {
      const int uses = 2;
      const std::int64_t rows = 8 / N;
      // Shard loss: mean over the shard (average: DDP averages) or share of the batch mean (sum).
      const Tensor xs = batch_rows(x, R * rows, (R + 1) * rows);
      const Tensor loss = net.loss(xs, uses) * (average ? 1.0 / rows : 1.0 / 8);
      ddp.backward(loss);
      ddp.synchronize();
      (ref.loss(x, uses) * (1.0 / 8)).backward();
      for (auto [name, p] : net.params()) {
        const Tensor rp = [&] { for (auto& [n, t] : ref.params()) if (n == name) return t; return Tensor(); }();
        if (name == "unused") {
          EXPECT_FALSE(p.grad().defined()) << "no rank reached it";
          continue;
        }
        ASSERT_TRUE(p.grad().defined()) << name;
        const auto a = p.grad().to_vector<double>(), b = rp.grad().to_vector<double>();
        for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-14) << name << "[" << i << "]";
        expect_same_on_every_rank(p.grad(), "grad " + name);
      }
      for (auto& [n, p] : net.params()) p.zero_grad();
      for (auto& [n, p] : ref.params()) p.zero_grad();
    }
    // Every bucket left during backward: the hooks (and, for `unused`, the graph walk) released them.
    EXPECT_EQ(ddp.stats().early_buckets, 3 * ddp.num_buckets());
    EXPECT_EQ(ddp.stats().late_buckets, 0);
    EXPECT_EQ(ddp.stats().unused_parameters, 3);
    EXPECT_EQ(ddp.stats().bytes_sent, 3 * ddp.bytes_per_step());
  }
}

TEST(DDP, AGraphThatChangesEveryStepStillOverlapsAndStaysRight) {
  const int R = dist::rank(), N = dist::world_size();
  Generator g(8);
  const Tensor x = Tensor::normal({4, 4}, 0, 1, g, DType::f64);
  Net net(2), ref(2);
  nn::DistributedDataParallel ddp(net.params(), nn::DDPOptions().bucket_bytes(300).average(false));
  // A different number of uses on each rank and in each step: the hooks know when a gradient is final.
  for (int uses : {1, 3, 2, 4}) {
    const std::int64_t rows = 4 / N;
    ddp.backward(net.loss(batch_rows(x, R * rows, (R + 1) * rows), uses + R) * 0.25);
    ddp.synchronize();
    for (int r = 0; r < N; ++r) (ref.loss(batch_rows(x, r * rows, (r + 1) * rows), uses + r) * 0.25).backward();
    const auto a = net.w_rec.grad().to_vector<double>(), b = ref.w_rec.grad().to_vector<double>();
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-14) << "uses " << uses;
    for (auto& [n, p] : net.params()) p.zero_grad();
    for (auto& [n, p] : ref.params()) p.zero_grad();
  }
  EXPECT_EQ(ddp.stats().late_buckets, 0);
}

TEST(DDP, GradientsAreTheirOwnAcrossStepsAndParameters) {
  // synchronize() hands out views of each bucket's gathered sum, a new buffer every step: a
  // gradient kept from one step must survive the next, and an in-place change to one parameter's
  // gradient (clipping) must not reach the others of its bucket.
  const int R = dist::rank(), N = dist::world_size();
  Generator g(9);
  const Tensor x = Tensor::normal({8, 4}, 0, 1, g, DType::f64);
  Net net(3);
  nn::DistributedDataParallel ddp(net.params(), nn::DDPOptions().average(false));
  ASSERT_EQ(ddp.num_buckets(), 1);  // the default 4 MiB holds all four: they share one buffer
  const std::int64_t rows = 8 / N;
  auto step = [&](int uses) {
    for (auto& [n, p] : net.params()) p.zero_grad();
    ddp.backward(net.loss(batch_rows(x, R * rows, (R + 1) * rows), uses) * 0.125);
    ddp.synchronize();
  };
  step(1);
  const Tensor kept = net.w_rec.grad();
  const std::vector<double> kept_values = kept.to_vector<double>();
  const std::vector<double> w_in_values = net.w_in.grad().to_vector<double>();
  const std::vector<double> w_out_values = net.w_out.grad().to_vector<double>();
  Tensor clipped = net.w_rec.grad();
  clipped.copy_(clipped * 0.5);  // clip one gradient in place
  EXPECT_EQ(net.w_in.grad().to_vector<double>(), w_in_values);
  EXPECT_EQ(net.w_out.grad().to_vector<double>(), w_out_values);
  std::vector<double> halved = kept_values;
  for (double& v : halved) v *= 0.5;
  EXPECT_EQ(kept.to_vector<double>(), halved);
  step(3);  // other gradients, gathered into a new buffer
  EXPECT_EQ(kept.to_vector<double>(), halved);
  EXPECT_NE(net.w_rec.grad().to_vector<double>(), kept_values);
  EXPECT_EQ(net.w_rec.grad().shape(), net.w_rec.shape());
}

TEST(DDP, AParameterOnlyOneRankUsesGetsItsGradientOnBoth) {
  // w_out used only on rank 0: rank 1 contributes zeros. With and without the graph walk.
  const int R = dist::rank(), N = dist::world_size();
  Generator g(11);
  const Tensor x = Tensor::normal({4, 4}, 0, 1, g, DType::f64);
  for (bool find : {true, false}) {
    Net net(5), ref(5);
    nn::DistributedDataParallel ddp(net.params(), nn::DDPOptions().bucket_bytes(300).average(false).find_unused_parameters(find));
    auto loss_of = [](const Net& n, const Tensor& xs, int r) {
      Tensor h = tanh(matmul(tanh(matmul(xs, n.w_in)), n.w_rec));
      return r == 0 ? sum(matmul(h, n.w_out)) : sum(h * h);
    };
    const std::int64_t rows = 4 / N;
    ddp.backward(loss_of(net, batch_rows(x, R * rows, (R + 1) * rows), R));
    ddp.synchronize();
    for (int r = 0; r < N; ++r) loss_of(ref, batch_rows(x, r * rows, (r + 1) * rows), r).backward();
    for (const Tensor* p : {&net.w_out, &net.w_rec}) {
      const Tensor& rp = p == &net.w_out ? ref.w_out : ref.w_rec;
      ASSERT_TRUE(p->grad().defined());
      const auto a = p->grad().to_vector<double>(), b = rp.grad().to_vector<double>();
      for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-14) << "find_unused " << find;
      expect_same_on_every_rank(p->grad(), "grad");
    }
    EXPECT_FALSE(net.unused.grad().defined());
    if (find) {
      EXPECT_EQ(ddp.stats().late_buckets, 0);
    }
  }
}

TEST(DDP, MisuseIsAClearError) {
  using testing::error_of;
  Generator g(12);
  const Tensor x = Tensor::normal({2, 4}, 0, 1, g, DType::f64);
  Net net(6);
  // Constructor errors: thrown on every rank alike, before the parameters' broadcast.
  EXPECT_EQ(error_of<std::invalid_argument>([&] { nn::DistributedDataParallel(net.params(), nn::DDPOptions().bucket_bytes(0)); }),
            "DistributedDataParallel: bucket_bytes must be >= 1");
  {
    // requires_grad_ refuses integer tensors; set_data can still swap one in under a leaf that requires grad.
    Tensor ids = Tensor::zeros({3}, DType::f64).requires_grad_();
    ids.set_data(Tensor::zeros({3}, DType::i64));
    ASSERT_TRUE(ids.requires_grad());
    ASSERT_EQ(ids.dtype(), DType::i64);
    EXPECT_EQ(error_of<std::invalid_argument>([&] { nn::DistributedDataParallel(nn::NamedTensors{{"w_in", net.w_in}, {"ids", ids}}); }),
              "DistributedDataParallel: parameter 'ids' has dtype int64 (f32 or f64 only)");
    const Tensor twice = net.w_in * 2.0;  // requires grad, an op's output
    ASSERT_TRUE(twice.requires_grad());
    ASSERT_FALSE(twice.is_leaf());
    EXPECT_EQ(error_of<std::invalid_argument>([&] { nn::DistributedDataParallel(nn::NamedTensors{{"twice", twice}}); }),
              "DistributedDataParallel: parameter 'twice' is not a leaf tensor");
  }
  tape::reset();
  nn::DistributedDataParallel ddp(net.params());
  // synchronize() with no last shard: refused locally on every rank, before any exchange.
  const std::string no_backward = "DistributedDataParallel::synchronize: no backward(loss, last = true) before it";
  EXPECT_EQ(error_of<std::logic_error>([&] { ddp.synchronize(); }), no_backward);
  ddp.backward(net.loss(x, 1));
  EXPECT_EQ(error_of<std::logic_error>([&] { ddp.backward(net.loss(x, 1)); }),  // a second last shard
            "DistributedDataParallel::backward: this step's last shard already ran; call synchronize() first");
  tape::reset();
  ddp.synchronize();
  EXPECT_EQ(error_of<std::logic_error>([&] { ddp.synchronize(); }), no_backward);  // a second synchronize
  // The averaged gradient not cleared: it would be counted again. w_in is the first parameter.
  EXPECT_EQ(error_of<std::logic_error>([&] { ddp.backward(net.loss(x, 1)); }),
            "DistributedDataParallel::backward: parameter 'w_in' still holds the gradient of the last synchronize(); "
            "call zero_grad() (e.g. optimizer.zero_grad()) before the next step's backward");
  tape::reset();
  for (auto& [n, p] : net.params()) p.zero_grad();
  // A plain backward before DDP's: its gradient is part of the shard DDP runs next.
  const int R = dist::rank(), N = dist::world_size();
  Net ref(6);
  (net.loss(x, 1) * (R + 1.0)).backward();
  ddp.backward(net.loss(x, 2));
  ddp.synchronize();
  for (int r = 0; r < N; ++r) {
    (ref.loss(x, 1) * (r + 1.0) * (1.0 / N)).backward();
    (ref.loss(x, 2) * (1.0 / N)).backward();
  }
  const auto a = net.w_rec.grad().to_vector<double>(), b = ref.w_rec.grad().to_vector<double>();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-14);
}

TEST(DDP, DestroyingItRemovesItsHooks) {
  Generator g(14);
  const Tensor x = Tensor::normal({2, 4}, 0, 1, g, DType::f64);
  Net net(7), ref(7);
  {
    nn::DistributedDataParallel ddp(net.params());
    ddp.backward(net.loss(x, 1));
    ddp.synchronize();
  }
  for (auto& [n, p] : net.params()) p.zero_grad();
  // A plain backward afterwards: no hook left to call into the destroyed object, no exchange.
  net.loss(x, 2).backward();
  ref.loss(x, 2).backward();
  EXPECT_EQ(net.w_rec.grad().to_vector<double>(), ref.w_rec.grad().to_vector<double>());
}

TEST(DDP, RowSparseGradientsTravelAsRowsWithTheDenseBits) {
  // An embedding table with compact gradients: each rank looks up its own ids (overlapping, some
  // repeated). Sent as rows (from the second step on) the gradients must have the dense
  // exchange's bits, also with local shards and with a rank whose gradient is dense.
  const int R = dist::rank();
  struct Emb {
    Tensor table, w;
    explicit Emb(DType dt) {
      Generator g(13);
      table = Tensor::normal({64, 5}, 0, 1, g, DType::f64).to(dt).requires_grad_();
      table.allow_compact_grad();
      w = Tensor::normal({5, 1}, 0, 1, g, DType::f64).to(dt).requires_grad_();
    }
    nn::NamedTensors params() const { return {{"table", table}, {"w", w}}; }
    Tensor loss(const std::vector<std::int64_t>& ids, bool twice) const {
      const Tensor idt = Tensor::from_vector(ids, {static_cast<std::int64_t>(ids.size())});
      Tensor e = embedding(table, idt);
      if (twice) e = e + embedding(table, idt) * 0.5;  // a second gradient: the table's becomes dense
      return sum(matmul(tanh(e), w));
    }
  };
  for (DType dt : {DType::f32, DType::f64})
    for (bool average : {true, false}) {
      Emb rows(dt), dense(dt);
      nn::DistributedDataParallel a(rows.params(), nn::DDPOptions().average(average));
      nn::DistributedDataParallel b(dense.params(), nn::DDPOptions().average(average).sparse_transfer(false));
      for (int step = 0; step < 5; ++step) {
        const std::int64_t base = 3 * step + 7 * R;
        const std::vector<std::int64_t> ids = {base, base + 1, base + 9, base, 40 + R, 40};
        const int shards = step == 2 ? 2 : 1;      // step 2: two local shards
        const bool twice = step == 3 && R == 1;    // step 3: rank 1's gradient is dense
        for (Emb* e : {&rows, &dense}) {
          nn::DistributedDataParallel& d = e == &rows ? a : b;
          for (int s = 0; s < shards; ++s) {
            std::vector<std::int64_t> shard_ids = ids;
            if (s == 1) shard_ids = {base + 2, 63, base + 2};
            d.backward(e->loss(shard_ids, twice), s == shards - 1);
          }
          d.synchronize();
        }
        for (const char* name : {"table", "w"}) {
          const Tensor ga = std::string(name) == "table" ? rows.table.grad() : rows.w.grad();
          const Tensor gb = std::string(name) == "table" ? dense.table.grad() : dense.w.grad();
          ASSERT_TRUE(ga.defined() && gb.defined());
          EXPECT_EQ(std::memcmp(ga.data_ptr(), gb.data_ptr(), static_cast<std::size_t>(ga.numel()) * dtype_size(dt)), 0)
              << name << " step " << step << " " << dtype_name(dt) << " average " << average;
          expect_same_on_every_rank(ga, std::string("grad ") + name);
        }
        for (auto& [n, p] : rows.params()) p.zero_grad();
        for (auto& [n, p] : dense.params()) p.zero_grad();
      }
      EXPECT_GE(a.stats().sparse_buckets, 3) << "the table never travelled as rows";
      EXPECT_EQ(b.stats().sparse_buckets, 0);
      EXPECT_LT(a.stats().wire_bytes, b.stats().wire_bytes);
    }
}

TEST(DDP, LocalShardsGiveTheSameBitsAsOneShardPerRank) {
  // 4 fixed shards of a batch: 2 ranks x 2 backward() calls must equal 1 rank x 4 (computed here
  // without communication by summing per-shard gradients in the same tree).
  const int R = dist::rank(), N = dist::world_size();
  ASSERT_EQ(N, 2);
  Generator g(9);
  const Tensor x = Tensor::normal({8, 4}, 0, 1, g, DType::f32);
  auto to_f32 = [](Net& n) { for (auto& [name, p] : n.params()) p.set_data(p.detach().to(DType::f32)); };
  Net net(3), ref(3);
  to_f32(net);
  to_f32(ref);
  nn::DistributedDataParallel ddp(net.params(), nn::DDPOptions().average(false));
  for (int j = 0; j < 2; ++j) {
    const int s = R * 2 + j;
    ddp.backward(net.loss(batch_rows(x, 2 * s, 2 * s + 2), 2) * 0.125, j == 1);
  }
  ddp.synchronize();
  std::vector<Tensor> shard_grads;
  for (int s = 0; s < 4; ++s) {
    (ref.loss(batch_rows(x, 2 * s, 2 * s + 2), 2) * 0.125).backward();
    shard_grads.push_back(ref.w_rec.grad());
    ref.w_rec.zero_grad();
  }
  std::vector<const float*> parts;
  for (auto& t : shard_grads) parts.push_back(t.data<float>());
  std::vector<float> want(36);
  dist::tree_sum(parts.data(), 4, 36, want.data());
  EXPECT_EQ(std::memcmp(net.w_rec.grad().data<float>(), want.data(), sizeof(float) * 36), 0);
}

TEST(DDP, TwoRunsGiveTheSameBits) {
  const int R = dist::rank(), N = dist::world_size();
  Generator g(10);
  const Tensor x = Tensor::normal({16, 4}, 0, 1, g, DType::f64);
  auto run = [&] {
    Net net(4);
    nn::DistributedDataParallel ddp(net.params(), nn::DDPOptions().bucket_bytes(200));
    for (int step = 0; step < 3; ++step) {
      const std::int64_t rows = 16 / N;
      ddp.backward(net.loss(batch_rows(x, R * rows, (R + 1) * rows), 1 + step % 2) * (1.0 / rows));
      ddp.synchronize();
      for (auto& [n, p] : net.params()) {
        if (!p.grad().defined()) continue;
        p.detach().copy_(p.detach() - p.grad() * 0.1);
        p.zero_grad();
      }
    }
    return net.w_rec.detach().clone();
  };
  const Tensor a = run(), b = run();
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  expect_same_on_every_rank(a, "parameters after 3 steps");
}

}  // namespace
}  // namespace tg

int main(int argc, char** argv) {
  tg::dist::Context mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  // Every rank's verdict decides the exit code of each, so mpirun fails if any rank failed.
  const std::vector<double> all = tg::dist::allgather(static_cast<double>(failed), "test verdicts");
  for (double f : all)
    if (f != 0) return 1;
  return 0;
}
