// tg::dist in one process (no mpirun): a world of one, with or without MPI in the build. The
// multi-rank tests are tests/dist (ctest dist.*, under mpirun -np 2).
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/dist.h"

namespace tg {
namespace {

TEST(DistLocal, WithoutALauncherTheWorldIsOneProcess) {
  dist::Context ctx;
  EXPECT_EQ(dist::rank(), 0);
  EXPECT_EQ(dist::world_size(), 1);
  EXPECT_FALSE(dist::initialized()) << "MPI must not start outside mpirun (singleton start-up is slow)";
  if (!dist::available()) {
    EXPECT_EQ(dist::backend(), "built without MPI");
  }
  Tensor t = Tensor::from_values({1.5, -2.0, 3.25}, {3}, DType::f32);
  dist::allreduce_sum(t);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  const void* buffer = t.data_ptr();
  dist::broadcast(t, 0);  // rank 0's values to every rank: here, unchanged and in place
  EXPECT_EQ(t.data_ptr(), buffer);
  EXPECT_EQ(t.shape(), Shape{3});
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  dist::barrier();
  try {
    dist::broadcast(t, 1);
    ADD_FAILURE() << "no exception for root 1 in a world of one";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("root 1 is not a rank of 1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 3.25f}));  // the failed call wrote nothing
  std::vector<double> got = dist::allgather(4.5, "test");
  EXPECT_EQ(got, std::vector<double>{4.5});
}

TEST(DistLocal, TreeSumOrder) {
  // ((a + b) + (c + d)) + e, the fixed pairwise tree, not a left fold.
  const float a = 1e8f, b = 1.f, c = -1e8f, d = 1.f, e = 0.5f;
  const float* parts[] = {&a, &b, &c, &d, &e};
  float out = 0;
  dist::tree_sum(parts, 5, 1, &out);
  // Tree of 5: split at 2 -> (a + b) + (c + (d + e)).
  const float want = (a + b) + (c + (d + e));
  EXPECT_EQ(out, want);
  dist::tree_sum(parts, 4, 1, &out);
  EXPECT_EQ(out, (a + b) + (c + d));
  EXPECT_NE((a + b) + (c + d), ((a + b) + c) + d) << "the values must tell the orders apart";
}

TEST(DistLocal, TreeSumLongArraysAndAliasing) {
  std::vector<double> x(5000), y(5000), z(5000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = i * 0.5, y[i] = 1.0 / (i + 1), z[i] = -double(i);
  const double* parts[] = {x.data(), y.data(), z.data()};
  std::vector<double> want(5000);
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = x[i] + (y[i] + z[i]);
  dist::tree_sum(parts, 3, 5000, x.data());  // out aliases parts[0]
  EXPECT_EQ(x, want);
}

TEST(DistLocal, TimeoutMustBePositive) {
  const double before = dist::timeout();
  EXPECT_GT(before, 0);
  EXPECT_THROW(dist::set_timeout(0), std::invalid_argument);
  dist::set_timeout(7);
  EXPECT_EQ(dist::timeout(), 7);
  dist::set_timeout(before);
}

}  // namespace
}  // namespace tg
