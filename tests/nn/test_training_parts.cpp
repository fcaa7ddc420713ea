// The parts of a training loop in nn/ besides the optimizers: LinearAnnealLR, LambdaLR::set_scale
// with PlateauDecay (the exact products the translators' trainer has always used), EarlyStopping's
// decisions, and their state_dict round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "nn/early_stopping.h"
#include "nn/lr_scheduler.h"
#include "nn/optim.h"

namespace {

using tg::Tensor;
using tg::nn::EarlyStopping;
using Mode = tg::nn::EarlyStopping::Mode;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct OneGroup {
  Tensor p = Tensor::zeros({1}).requires_grad_();
  tg::nn::SGD opt;
  explicit OneGroup(double lr) : opt({{"p", p}}, tg::nn::SGDOptions(lr)) {}
  double lr() const { return opt.param_groups()[0].lr(); }
};

TEST(LinearAnnealLR, ConstantUntilFromThenLinearToZeroAtTo) {
  const double lr = 0.0037;
  OneGroup o(lr);
  tg::nn::LinearAnnealLR s(o.opt, 4, 10);
  for (std::int64_t done = 0; done <= 12; ++done) {
    if (done > 0) s.step();
    const double left = static_cast<double>(10 - done) / 6.0;
    EXPECT_EQ(o.lr(), lr * std::clamp(left, 0.0, 1.0)) << "after " << done << " updates";
  }
  EXPECT_EQ(o.lr(), 0.0);
  OneGroup r(lr);  // resumed after 7 updates: update 8's rate first
  tg::nn::LinearAnnealLR resumed(r.opt, 4, 10, 7);
  EXPECT_EQ(r.lr(), lr * (3.0 / 6.0));
  EXPECT_THROW(tg::nn::LinearAnnealLR(r.opt, 5, 5), std::invalid_argument);
  EXPECT_THROW(tg::nn::LinearAnnealLR(r.opt, -1, 5), std::invalid_argument);
  EXPECT_THROW(tg::nn::LinearAnnealLR(r.opt, 0, 5, -1), std::invalid_argument);
}

TEST(LambdaLR, SetScaleMultipliesTheBaseLrBeforeTheLambda) {
  const double lr = 0.1, scale = 0.7 * 0.7 * 0.7;
  OneGroup o(lr);
  tg::nn::LinearAnnealLR s(o.opt, 0, 7);
  s.step();
  s.set_scale(scale);  // the current epoch's lr changes at once
  EXPECT_EQ(o.lr(), (lr * scale) * (6.0 / 7.0));
  s.step();
  EXPECT_EQ(o.lr(), (lr * scale) * (5.0 / 7.0));
  EXPECT_EQ(s.scale(), scale);
  s.set_scale(1.0);
  EXPECT_EQ(o.lr(), lr * (5.0 / 7.0));
  EXPECT_THROW(s.set_scale(0.0), std::invalid_argument);
  EXPECT_EQ(o.lr(), lr * (5.0 / 7.0));
}

TEST(PlateauDecay, DecaysAfterPatienceBadValidationsAndCountsAgain) {
  const double lr = 0.005;
  OneGroup o(lr);
  tg::nn::LambdaLR constant(o.opt, [](std::int64_t) { return 1.0; });
  tg::nn::PlateauDecay decay(constant, 0.5, 2);
  EXPECT_FALSE(decay.step(false));
  EXPECT_FALSE(decay.step(true));  // an improvement resets the count
  EXPECT_FALSE(decay.step(false));
  EXPECT_TRUE(decay.step(false));
  EXPECT_EQ(decay.state().scale, 0.5);
  EXPECT_EQ(decay.state().bad_validations, 0);
  EXPECT_EQ(o.lr(), lr * 0.5);
  EXPECT_FALSE(decay.step(false));
  EXPECT_TRUE(decay.step(false));
  EXPECT_EQ(o.lr(), lr * 0.25);
  constant.step();  // the schedule keeps the scale
  EXPECT_EQ(o.lr(), lr * 0.25);
}

TEST(PlateauDecay, FactorOneNeverDecaysAndTheScaleStopsAtTheSmallestNormalDouble) {
  OneGroup o(1.0), t(1.0);
  tg::nn::LambdaLR c(o.opt, [](std::int64_t) { return 1.0; });
  tg::nn::PlateauDecay never(c, 1.0, 1);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(never.step(false));
  EXPECT_EQ(never.state().bad_validations, 5);  // counts on, as the trainer's lr_bad_validations
  EXPECT_EQ(o.lr(), 1.0);
  tg::nn::LambdaLR c2(t.opt, [](std::int64_t) { return 1.0; });
  tg::nn::PlateauDecay fast(c2, 1e-9, 1);
  for (int i = 0; i < 40; ++i) fast.step(false);
  EXPECT_EQ(fast.state().scale, std::numeric_limits<double>::min());
  EXPECT_GT(t.lr(), 0.0);
}

TEST(PlateauDecay, StateRoundTripContinuesTheSameLrs) {
  const double lr = 0.003;
  OneGroup a(lr), b(lr);
  tg::nn::LinearAnnealLR sa(a.opt, 2, 20), sb(b.opt, 2, 20);
  tg::nn::PlateauDecay da(sa, 0.7, 1);
  da.step(false);
  da.step(false);
  tg::nn::PlateauDecay db(sb, 0.7, 1);
  db.load_state_dict(da.state_dict());
  EXPECT_EQ(db.state().scale, 0.7 * 0.7);
  EXPECT_EQ(b.lr(), a.lr());
  for (int i = 0; i < 5; ++i) {
    sa.step();
    sb.step();
    EXPECT_EQ(da.step(i % 2 == 0), db.step(i % 2 == 0));
    EXPECT_EQ(b.lr(), a.lr());
  }
  // Built from a state, as the trainer does on a resume.
  OneGroup c(lr);
  tg::nn::LinearAnnealLR sc(c.opt, 2, 20, 5);
  tg::nn::PlateauDecay dc(sc, 0.7, 1, {.scale = da.state().scale, .bad_validations = 0});
  EXPECT_EQ(c.lr(), a.lr());
  auto bad = da.state_dict();
  bad[0].second = Tensor::scalar(0.0, tg::DType::f64);
  EXPECT_THROW(db.load_state_dict(bad), std::runtime_error);
  EXPECT_EQ(db.state().scale, da.state().scale);  // unchanged
  EXPECT_THROW(tg::nn::PlateauDecay(sc, 0.0, 1), std::invalid_argument);
  EXPECT_THROW(tg::nn::PlateauDecay(sc, 0.5, 0), std::invalid_argument);
}

TEST(EarlyStopping, MinModeFirstIsBestThenPatience) {
  EarlyStopping stop(Mode::min, 2);
  EXPECT_FALSE(stop.has_best());
  EXPECT_TRUE(stop.step(5, 3.0));
  EXPECT_TRUE(stop.step(10, 2.5));
  EXPECT_FALSE(stop.step(15, 2.5));  // equal is not better
  EXPECT_FALSE(stop.should_stop());
  EXPECT_FALSE(stop.step(20, kNaN));
  EXPECT_TRUE(stop.should_stop());
  const auto& s = stop.state();
  EXPECT_EQ(s.validations, 4);
  EXPECT_EQ(s.last_step, 20);
  EXPECT_EQ(s.best_step, 10);
  EXPECT_EQ(s.best, 2.5);
  EXPECT_EQ(s.bad_validations, 2);
  EXPECT_THROW(stop.step(0, 1.0), std::invalid_argument);
  EarlyStopping never(Mode::min);
  for (int i = 1; i < 10; ++i) never.step(i, 1.0);
  EXPECT_FALSE(never.should_stop());
}

TEST(EarlyStopping, MaxModeWithATieBreakKeepsTheSecondFigure) {
  // The trainer's "highest dev BLEU, ties by the lower dev loss".
  EarlyStopping stop(Mode::max, 0, Mode::min);
  EXPECT_TRUE(stop.step(1, 10.0, 2.0));
  EXPECT_FALSE(stop.step(2, 10.0, 2.0));
  EXPECT_TRUE(stop.step(3, 10.0, 1.5));
  EXPECT_FALSE(stop.step(4, 9.0, 0.1));
  EXPECT_TRUE(stop.step(5, 11.0, 9.0));
  EXPECT_EQ(stop.state().best, 11.0);
  EXPECT_EQ(stop.state().best_second, 9.0);
  // Without a tie break the second figure is only recorded.
  EarlyStopping plain(Mode::max);
  plain.step(1, 10.0, 2.0);
  EXPECT_FALSE(plain.step(2, 10.0, 1.0));
  EXPECT_EQ(plain.state().best_second, 2.0);
}

TEST(EarlyStopping, StateRoundTripAndChecks) {
  EarlyStopping a(Mode::min, 3);
  a.step(1, 2.0, 7.0);
  a.step(2, 3.0);
  EarlyStopping b(Mode::min, 3);
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.state().validations, 2);
  EXPECT_EQ(b.state().best_step, 1);
  EXPECT_EQ(b.state().bad_validations, 1);
  EXPECT_EQ(b.state().best_second, 7.0);
  for (int s = 3; s < 6; ++s) EXPECT_EQ(a.step(s, 2.0 - s * 0.1 * (s % 2)), b.step(s, 2.0 - s * 0.1 * (s % 2)));
  EXPECT_EQ(a.should_stop(), b.should_stop());
  auto missing = a.state_dict();
  missing.pop_back();
  EXPECT_THROW(b.load_state_dict(missing), std::runtime_error);
  auto extra = a.state_dict();
  extra.emplace_back("early_stopping.other", Tensor::scalar(1.0, tg::DType::f64));
  EXPECT_THROW(b.load_state_dict(extra), std::runtime_error);
  EXPECT_THROW(EarlyStopping(Mode::min, -1), std::invalid_argument);
}

}  // namespace
