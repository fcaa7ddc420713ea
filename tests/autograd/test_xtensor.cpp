// The xtensor interop header: views share the tensor's buffer both ways; expressions become tensors.
#include "autograd/xtensor.h"

#include <gtest/gtest.h>

#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "autograd/ops_elementwise.h"
#include "autograd/ops_shape.h"

namespace {

using tg::DType;
using tg::Tensor;

TEST(Xtensor, ViewWritesAreVisibleInTheTensorAndBack) {
  Tensor t = Tensor::zeros({2, 3}, DType::f64);
  auto v = tg::as_xtensor<double>(t);
  ASSERT_EQ(v.dimension(), 2u);
  EXPECT_EQ(v.shape()[0], 2u);
  EXPECT_EQ(v.shape()[1], 3u);
  v(1, 2) = 5.0;
  xt::view(v, 0, xt::all()) = xt::arange<double>(3);
  EXPECT_EQ(t.at({1, 2}), 5.0);
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{0, 1, 2, 0, 0, 5}));

  t.fill_(7.0);  // and the other way
  EXPECT_EQ(v(0, 1), 7.0);
  EXPECT_EQ(v.data(), t.data<double>());  // the same buffer, not a copy
}

TEST(Xtensor, FixedRankViewAndReadOnlyView) {
  Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  auto v = tg::as_xtensor<float, 2>(t);
  v(2, 1) = -1.f;
  EXPECT_EQ(t.at({2, 1}), -1.0);
  const Tensor& c = t;
  auto r = tg::as_xtensor<float>(c);
  EXPECT_EQ(r(0, 1), 2.f);
  static_assert(std::is_const_v<std::remove_reference_t<decltype(*r.data())>>, "read-only view");
  EXPECT_THROW((tg::as_xtensor<float, 3>(t)), std::invalid_argument);
}

TEST(Xtensor, DtypeMismatchIsAClearError) {
  Tensor t = Tensor::zeros({2}, DType::f32);
  try {
    (void)tg::as_xtensor<double>(t);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tensor has dtype float32, accessed as float64"), std::string::npos) << what;
  }
  Tensor undefined;
  try {
    (void)tg::as_xtensor<float>(undefined);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "tg::as_xtensor: undefined tensor");
  }
}

TEST(Xtensor, ExpressionBecomesATensorOfTheMatchingDtype) {
  xt::xarray<float> a = {{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  xt::xarray<float> b = {10.f, 20.f, 30.f};
  Tensor t = tg::from_xtensor(a * 2.f + b);  // broadcasting (2,3) with (3)
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.shape(), tg::Shape({2, 3}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{12, 24, 36, 18, 30, 42}));
  EXPECT_FALSE(t.requires_grad());

  Tensor d = tg::from_xtensor(xt::exp(xt::xarray<double>{0.0, 1.0}));
  EXPECT_EQ(d.dtype(), DType::f64);
  EXPECT_DOUBLE_EQ(d.at({1}), std::exp(1.0));

  Tensor i = tg::from_xtensor(xt::arange<int>(4));  // integers are held as i64
  EXPECT_EQ(i.dtype(), DType::i64);
  EXPECT_EQ(i.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 2, 3}));
}

TEST(Xtensor, ZeroDimensionalAndEmpty) {
  Tensor s = tg::from_xtensor(xt::xarray<double>(3.5));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item(), 3.5);
  Tensor e = tg::from_xtensor(xt::xarray<float>::from_shape({0, 4}));
  EXPECT_EQ(e.shape(), tg::Shape({0, 4}));
  EXPECT_EQ(tg::as_xtensor<float>(e).size(), 0u);
  auto sv = tg::as_xtensor<double>(s);
  EXPECT_EQ(sv.dimension(), 0u);
  EXPECT_EQ(sv(), 3.5);
}

TEST(Xtensor, RoundTripThroughAnOpAndToXarray) {
  xt::xarray<double> x = {{0.5, -1.0}, {2.0, 0.0}};
  Tensor y = tg::tanh(tg::from_xtensor(x));
  xt::xarray<double> back = tg::to_xarray<double>(y);
  EXPECT_TRUE(xt::allclose(back, xt::tanh(x), 0.0, 1e-15));
  back(0, 0) = 100.0;  // a copy: the tensor is unchanged
  EXPECT_NE(y.at({0, 0}), 100.0);
}

}  // namespace

TEST(Xtensor, BoolTensorsAndComparisons) {
  xt::xarray<double> a = {1.0, -2.0, 3.0};
  Tensor m = tg::from_xtensor(a > 0.0);  // xtensor comparisons yield bool: a b8 tensor
  EXPECT_EQ(m.dtype(), DType::b8);
  EXPECT_EQ(m.to_vector<bool>(), (std::vector<bool>{true, false, true}));
  auto v = tg::as_xtensor<bool>(m);
  v(1) = true;
  EXPECT_EQ(m.at({1}), 1.0);
  EXPECT_THROW(tg::as_xtensor<std::int64_t>(m), std::invalid_argument);
}
