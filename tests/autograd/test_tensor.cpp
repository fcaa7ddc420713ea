#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"

using namespace tg;

TEST(Tensor, FactoriesShapeAndElements) {
  Tensor z = Tensor::zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_EQ(z.at({1, 2}), 0.0);
  EXPECT_EQ(Tensor::ones({4}, DType::f64).at({3}), 1.0);
  EXPECT_EQ(Tensor::full({2}, 2.5).at({1}), 2.5);
  EXPECT_EQ(Tensor::scalar(7.0).item(), 7.0);
  EXPECT_EQ(Tensor::scalar(7.0).dim(), 0);

  Tensor a = Tensor::arange(0, 5);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Tensor::arange(1, 2, 0.25, DType::f64).to_vector<double>(), (std::vector<double>{1, 1.25, 1.5, 1.75}));

  Tensor v = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(v.at({1, 0}), 4.0);
  EXPECT_EQ(v.size(-1), 3);
  Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{3, 1}, {2});
  EXPECT_EQ(ids.dtype(), DType::i64);
  EXPECT_EQ(ids.at({0}), 3.0);
}

TEST(Tensor, BadConstructionThrows) {
  EXPECT_THROW(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}), std::invalid_argument);
  EXPECT_THROW(Tensor::zeros({2}).item(), std::invalid_argument);
  EXPECT_THROW(Tensor::zeros({2, 2}).at({2, 0}), std::out_of_range);
  EXPECT_THROW(Tensor::zeros({2}).data<double>(), std::invalid_argument);
  EXPECT_THROW(Tensor::zeros({-1}), std::invalid_argument);
  EXPECT_THROW(Tensor::zeros({1, 1, 1, 1, 1, 1, 1, 1, 1}), std::invalid_argument);
}

TEST(Tensor, SeededRandomIsReproducible) {
  Generator g1(42), g2(42), g3(43);
  Tensor a = Tensor::uniform({100}, -1, 1, g1);
  Tensor b = Tensor::uniform({100}, -1, 1, g2);
  Tensor c = Tensor::uniform({100}, -1, 1, g3);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_NE(a.to_vector<float>(), c.to_vector<float>());
  for (float x : a.to_vector<float>()) {
    EXPECT_GE(x, -1.0f);
    EXPECT_LT(x, 1.0f);
  }
  Generator gn(1);
  Tensor n = Tensor::normal({20000}, 2.0, 3.0, gn, DType::f64);
  const double m = mean(n).item();
  const double var = mean(square(n - m)).item();
  EXPECT_NEAR(m, 2.0, 0.1);
  EXPECT_NEAR(std::sqrt(var), 3.0, 0.1);
}

TEST(Tensor, ToDtypeConvertsAndIsDifferentiable) {
  Tensor x = Tensor::from_vector(std::vector<float>{1.5f, -2.0f}, {2});
  Tensor d = x.to(DType::f64);
  EXPECT_EQ(d.dtype(), DType::f64);
  EXPECT_EQ(d.at({1}), -2.0);
  EXPECT_EQ(x.to(DType::i64).at({0}), 1.0);

  Tensor w = Tensor::from_vector(std::vector<double>{1.0, 2.0}, {2}).requires_grad_();
  sum(w.to(DType::f32) * 3.0).backward();
  EXPECT_EQ(w.grad().dtype(), DType::f64);
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{3.0, 3.0}));
}

TEST(Tensor, PrintingIsReadable) {
  Tensor v = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  const std::string s = v.str();
  EXPECT_NE(s.find("tensor([["), std::string::npos) << s;
  EXPECT_NE(s.find("4.0000"), std::string::npos) << s;
  EXPECT_NE(s.find("dtype=float32"), std::string::npos) << s;
  std::ostringstream os;
  os << Tensor::from_vector(std::vector<std::int64_t>{5, 6}, {2});
  EXPECT_EQ(os.str(), "tensor([5, 6], dtype=int64)");
  EXPECT_NE(Tensor::zeros({100}).str().find("..."), std::string::npos);
}

TEST(Tensor, CopyAndFillOutsideAutograd) {
  Tensor a = Tensor::zeros({3});
  a.copy_(Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}));
  EXPECT_EQ(a.at({2}), 3.0);
  a.fill_(9);
  EXPECT_EQ(a.at({0}), 9.0);
  EXPECT_THROW(a.copy_(Tensor::zeros({4})), std::invalid_argument);
}

TEST(Tensor, SetDataSharesTheSourceAndKeepsAutogradIdentity) {
  Tensor p = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  p.requires_grad_();
  Tensor alias = p;  // another handle, as a module member and an optimizer hold
  tg::sum(tg::square(p)).backward();
  ASSERT_TRUE(p.grad().defined());
  const Tensor src = Tensor::from_vector(std::vector<double>{4, 5}, {2});
  p.set_data(src);
  EXPECT_EQ(alias.dtype(), tg::DType::f64);  // every handle sees the new data
  EXPECT_EQ(alias.shape(), tg::Shape({2}));
  EXPECT_TRUE(alias.shares_storage(src));
  EXPECT_TRUE(alias.requires_grad());
  EXPECT_FALSE(alias.grad().defined());  // the old gradient no longer matches
  tg::sum(alias * 3.0).backward();
  EXPECT_EQ(p.grad().to_vector<double>(), (std::vector<double>{3, 3}));
  const Tensor y = p * 2.0;  // an op's output
  EXPECT_THROW(const_cast<Tensor&>(y).set_data(src), std::invalid_argument);
  EXPECT_THROW(p.set_data(Tensor()), std::invalid_argument);
}

TEST(Tensor, DispatchFloatingIsPublic) {
  const auto size_of = [](auto tag) { return sizeof(tag); };
  EXPECT_EQ(tg::dispatch_floating("op", tg::DType::f32, size_of), sizeof(float));
  EXPECT_EQ(tg::dispatch_floating("op", tg::DType::f64, size_of), sizeof(double));
  try {
    tg::dispatch_floating("my_layer", tg::DType::i64, size_of);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("my_layer: expects a floating-point tensor, got int64"), std::string::npos) << e.what();
  }
}
