// Sums over rows whose (outer, column chunk) tasks are too few to share between threads split the rows
// into fixed blocks (autograd/kernels/reduce.cpp): checked against a plain sequential loop, exactly on
// integer values (every order of adding them gives the same float) and within rounding on random
// ones, and bitwise equal at 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "autograd/ops_reduce.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tensor.h"

using namespace tg;

namespace {

struct Case {
  Shape shape;
  std::int64_t axis;
};

// Shapes that take the row-block path (few column chunks, many rows), and one that does not.
const std::vector<Case> kCases = {
    {{2048, 256}, 0},      // a linear layer's bias gradient: 1 task of 256 columns
    {{4096, 32}, 0},       // narrow rows
    {{3, 700, 300}, 1},    // 3 outer tasks
    {{2049, 513}, 0},      // 2 column chunks, the second one column wide; rows not a multiple of the block
    {{64, 1024}, 0},       // small: the unsplit path
};

// The plain version: out[o, j] = x[o, 0, j] + x[o, 1, j] + ... in row order, in double.
std::vector<double> plain_sum(const std::vector<float>& x, const Shape& s, std::int64_t axis) {
  std::int64_t outer = 1, R = s[axis], inner = 1;
  for (int i = 0; i < axis; ++i) outer *= s[i];
  for (int i = static_cast<int>(axis) + 1; i < s.size(); ++i) inner *= s[i];
  std::vector<double> out(static_cast<std::size_t>(outer * inner), 0.0);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t r = 0; r < R; ++r)
      for (std::int64_t j = 0; j < inner; ++j) out[o * inner + j] += x[(o * R + r) * inner + j];
  return out;
}

}  // namespace

TEST(SumRowBlocks, IntegerValuesEqualThePlainLoopExactly) {
  for (const auto& c : kCases) {
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      SplitMix64 rng{42};
      std::vector<float> v(static_cast<std::size_t>(c.shape.numel()));
      for (auto& e : v) e = static_cast<float>(rng.below(17)) - 8.0f;  // sums stay far below 2^24: exact
      const std::vector<float> got = sum(Tensor::from_vector(v, c.shape), {c.axis}).to_vector<float>();
      const std::vector<double> want = plain_sum(v, c.shape, c.axis);
      ASSERT_EQ(got.size(), want.size()) << c.shape.str();
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(static_cast<double>(got[i]), want[i]) << c.shape.str() << " axis " << c.axis << " element " << i
                                                        << " threads " << threads;
    }
  }
  set_num_threads(0);
}

TEST(SumRowBlocks, RandomValuesWithinRoundingAndIndependentOfThreads) {
  for (const auto& c : kCases) {
    Generator gen(7);
    const Tensor x = Tensor::uniform(c.shape, -1, 1, gen);
    const std::vector<float> v = x.to_vector<float>();
    const std::vector<double> want = plain_sum(v, c.shape, c.axis);
    set_num_threads(1);
    const std::vector<float> one = sum(x, {c.axis}).to_vector<float>();
    set_num_threads(2);
    const std::vector<float> two = sum(x, {c.axis}).to_vector<float>();
    set_num_threads(0);
    ASSERT_EQ(one.size(), two.size());
    EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0) << c.shape.str();
    // float32 accumulation of R values in [-1, 1]: error well under R * 2^-24 * R.
    const double R = static_cast<double>(c.shape[c.axis]);
    for (std::size_t i = 0; i < one.size(); ++i)
      ASSERT_NEAR(one[i], want[i], 1e-6 * R) << c.shape.str() << " element " << i;
  }
}
